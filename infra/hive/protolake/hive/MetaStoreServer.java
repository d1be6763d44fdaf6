package protolake.hive;

import java.net.InetSocketAddress;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.TUGIBasedProcessor;
import org.apache.hadoop.hive.thrift.TUGIContainingTransport;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;

/**
 * A Hive 2.3 metastore thrift service bound to one address.
 *
 * <p>Usage: {@code MetaStoreServer HOST PORT}, with hive-site.xml on the classpath (the
 * database behind it, the warehouse folder). Hive 2.3's own {@code HiveMetaStore.main} always
 * listens on every interface; this serves the same handler, processor and transport as Hive's
 * unsecured mode (set_ugi on, unframed binary protocol), on HOST only.
 */
public final class MetaStoreServer {
  private MetaStoreServer() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: MetaStoreServer HOST PORT");
      System.exit(2);
    }
    String host = args[0];
    int port = Integer.parseInt(args[1]);
    HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
    // The retrying proxy initialises the handler: opens the database, creates the schema when
    // datanucleus.schema.autoCreateAll is on, and the `default` database.
    IHMSHandler handler = HiveMetaStore.newRetryingHMSHandler(
        new HiveMetaStore.HMSHandler("protolake metastore", conf, false), conf);
    TServerSocket socket = new TServerSocket(new InetSocketAddress(host, port));
    long maxMessage = conf.getLongVar(HiveConf.ConfVars.METASTORESERVERMAXMESSAGESIZE);
    TThreadPoolServer.Args serverArgs = new TThreadPoolServer.Args(socket)
        .processor(new TUGIBasedProcessor<>(handler))
        .transportFactory(new TUGIContainingTransport.Factory())
        .protocolFactory(new TBinaryProtocol.Factory())
        .inputProtocolFactory(new TBinaryProtocol.Factory(true, true, maxMessage, -1))
        .minWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMINTHREADS))
        .maxWorkerThreads(conf.getIntVar(HiveConf.ConfVars.METASTORESERVERMAXTHREADS));
    TServer server = new TThreadPoolServer(serverArgs);
    Runtime.getRuntime().addShutdownHook(new Thread(server::stop, "metastore-shutdown"));
    HiveMetaStore.LOG.info("protolake metastore serving on " + host + ":" + port);
    System.out.println("metastore serving on " + host + ":" + port);
    server.serve();
  }
}
