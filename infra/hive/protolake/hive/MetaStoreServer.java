package protolake.hive;

import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import javax.jdo.PersistenceManager;
import javax.xml.parsers.DocumentBuilderFactory;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.ObjectStore;
import org.apache.hadoop.hive.metastore.TUGIBasedProcessor;
import org.apache.hadoop.hive.thrift.TUGIContainingTransport;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.datanucleus.api.jdo.JDOPersistenceManagerFactory;
import org.datanucleus.store.schema.SchemaAwareStoreManager;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * A Hive 2.3 metastore thrift service bound to one address.
 *
 * <p>Usage: {@code MetaStoreServer HOST PORT}, with hive-site.xml on the classpath (the
 * database behind it, the warehouse folder). Hive 2.3's own {@code HiveMetaStore.main} always
 * listens on every interface; this serves the same handler, processor and transport as Hive's
 * unsecured mode (set_ugi on, unframed binary protocol), on HOST only.
 *
 * <p>Before serving, it creates every table of the metastore's model (the classes of Hive's
 * package.jdo) that the database lacks. DataNucleus would otherwise create a table the first
 * time a call needs it, inside that call's transaction, from another connection: on PostgreSQL
 * the new table's foreign key then waits for a lock the call itself holds, and the call hangs.
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
    createSchema(conf);
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

  /** Create the tables of every model class of package.jdo that the database lacks. */
  private static void createSchema(HiveConf conf) throws Exception {
    Set<String> classes = new TreeSet<>();
    try (InputStream jdo = ObjectStore.class.getClassLoader().getResourceAsStream("package.jdo")) {
      if (jdo == null) {
        throw new IllegalStateException("package.jdo is not on the class path");
      }
      DocumentBuilderFactory factory = DocumentBuilderFactory.newInstance();
      factory.setValidating(false);
      factory.setFeature("http://apache.org/xml/features/nonvalidating/load-external-dtd", false);
      NodeList packages = factory.newDocumentBuilder().parse(jdo).getElementsByTagName("package");
      for (int i = 0; i < packages.getLength(); i++) {
        Element pkg = (Element) packages.item(i);
        NodeList members = pkg.getElementsByTagName("class");
        for (int j = 0; j < members.getLength(); j++) {
          classes.add(pkg.getAttribute("name") + "." + ((Element) members.item(j)).getAttribute("name"));
        }
      }
    }
    ObjectStore store = new ObjectStore();
    store.setConf(conf);
    PersistenceManager pm = store.getPersistenceManager();
    try {
      JDOPersistenceManagerFactory pmf =
          (JDOPersistenceManagerFactory) pm.getPersistenceManagerFactory();
      ((SchemaAwareStoreManager) pmf.getNucleusContext().getStoreManager())
          .createSchemaForClasses(classes, new Properties());
    } finally {
      pm.close();
      store.shutdown();
    }
  }
}
