/*
 * mongoplex test backend launcher: starts mongo-java-server (in-memory backend)
 * on a loopback address, prints exactly one line "READY <host>:<port>" on stdout
 * once the socket accepts connections, and runs until killed (SIGTERM/SIGINT
 * trigger a clean shutdown through a JVM shutdown hook).
 *
 * Usage: java -jar mongoplex-testserver.jar [--host 127.0.0.1] [--port N]
 *                                           [--mongo-version 3.6|4.0|5.0]
 * --port 0 (the default) lets the OS pick a free port.
 * --mongo-version sets the reported server version / maxWireVersion
 * (default: the library's default).
 */
package mongoplex.testserver;

import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.ServerVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

import java.net.InetSocketAddress;
import java.util.concurrent.CountDownLatch;

public final class Main {
    public static void main(String[] args) throws Exception {
        String host = "127.0.0.1";
        int port = 0;
        String version = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) usage("missing value for " + a);
            switch (a) {
                case "--host": host = args[++i]; break;
                case "--port": port = Integer.parseInt(args[++i]); break;
                case "--mongo-version": version = args[++i]; break;
                default: usage("unknown argument " + a);
            }
        }

        MemoryBackend backend = new MemoryBackend();
        if (version != null) {
            switch (version) {
                case "3.6": backend.version(ServerVersion.MONGO_3_6); break;
                case "4.0": backend.version(ServerVersion.MONGO_4_0); break;
                case "5.0": backend.version(ServerVersion.MONGO_5_0); break;
                default: usage("unsupported --mongo-version " + version);
            }
        }

        MongoServer server = new MongoServer(backend);
        server.bind(host, port); // returns once the socket is bound and listening
        InetSocketAddress addr = server.getLocalAddress();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.shutdownNow();
            stopped.countDown();
        }, "shutdown"));

        System.out.println("READY " + addr.getHostString() + ":" + addr.getPort());
        System.out.flush();
        stopped.await();
    }

    private static void usage(String why) {
        System.err.println("mongoplex-testserver: " + why);
        System.err.println("usage: [--host H] [--port N] [--mongo-version 3.6|4.0|5.0]");
        System.exit(2);
    }
}
