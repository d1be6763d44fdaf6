package protolake.hive;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * HiveServer2 CUSTOM authentication with one user and one password.
 *
 * <p>The user is {@code PROTOLAKE_SQL_USER} (default {@code protolake}); the password is read
 * from the file named by {@code PROTOLAKE_SQL_PASSWORD_FILE} (first line), else from
 * {@code PROTOLAKE_SQL_PASSWORD}, at every login, so a changed file takes effect without a
 * restart. Neither value is ever logged; a refused login names only the user.
 */
public final class PasswordAuthenticator implements PasswdAuthenticationProvider {
  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    String wantUser = System.getenv().getOrDefault("PROTOLAKE_SQL_USER", "protolake");
    String want = expectedPassword();
    if (want == null || want.isEmpty()) {
      throw new AuthenticationException("no password is configured for the SQL endpoint");
    }
    boolean userOk = wantUser.equals(user);
    boolean passwordOk = MessageDigest.isEqual(
        want.getBytes(StandardCharsets.UTF_8),
        (password == null ? "" : password).getBytes(StandardCharsets.UTF_8));
    if (!(userOk && passwordOk)) {
      throw new AuthenticationException("wrong user or password for user '" + user + "'");
    }
  }

  private static String expectedPassword() throws AuthenticationException {
    String file = System.getenv("PROTOLAKE_SQL_PASSWORD_FILE");
    if (file != null && !file.isEmpty()) {
      try {
        String text = new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.UTF_8);
        int end = text.indexOf('\n');
        return (end < 0 ? text : text.substring(0, end)).replace("\r", "");
      } catch (IOException e) {
        throw new AuthenticationException("cannot read the password file " + file);
      }
    }
    return System.getenv("PROTOLAKE_SQL_PASSWORD");
  }
}
