import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

/**
 * Starts DynamoDB Local bound to 127.0.0.1 only.
 *
 * DynamoDBLocal.jar has no option for the listen address and binds every
 * interface. This launcher builds the server from the usual command line,
 * sets the Jetty connector's host to loopback, then starts it.
 */
public class DynamoDBLoopback {
    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        for (Connector c : server.getConnectors()) {
            if (c instanceof ServerConnector) {
                ((ServerConnector) c).setHost("127.0.0.1");
            }
        }
        proxy.start();
        System.out.println("LISTENING");
        System.out.flush();
        proxy.join();
    }
}
