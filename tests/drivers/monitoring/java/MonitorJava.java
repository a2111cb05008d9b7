// The Java driver's side of tests/drivers/monitoring (heartbeats_java), run
// in source-file mode against the modern suite's shaded jar (mongodb-driver-sync
// 5.14.0, tests/drivers/java, built by tests/drivers/install.sh):
//
//   java -cp $CACHE/mongoplex-modern-java.jar MonitorJava.java URI SECONDS HEARTBEAT_MS
//
// connects with the default server monitoring mode (AUTO: streaming when the
// server's hello carries topologyVersion), pings, then stays idle for SECONDS
// and prints one JSON line {started, succeeded, awaited, failed, driver}: the
// heartbeat events of that window (ServerMonitorListener; awaited =
// ServerHeartbeatSucceededEvent.isAwaited()).
import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.event.ServerHeartbeatFailedEvent;
import com.mongodb.event.ServerHeartbeatStartedEvent;
import com.mongodb.event.ServerHeartbeatSucceededEvent;
import com.mongodb.event.ServerMonitorListener;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.Document;

public class MonitorJava {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: MonitorJava URI SECONDS HEARTBEAT_MS");
            System.exit(2);
        }
        java.util.logging.LogManager.getLogManager().reset();
        AtomicBoolean counting = new AtomicBoolean(false);
        AtomicInteger started = new AtomicInteger(), succeeded = new AtomicInteger(),
                awaited = new AtomicInteger(), failed = new AtomicInteger();
        ServerMonitorListener l = new ServerMonitorListener() {
            @Override
            public void serverHearbeatStarted(ServerHeartbeatStartedEvent e) {
                if (counting.get()) started.incrementAndGet();
            }

            @Override
            public void serverHeartbeatSucceeded(ServerHeartbeatSucceededEvent e) {
                if (!counting.get()) return;
                succeeded.incrementAndGet();
                if (e.isAwaited()) awaited.incrementAndGet();
            }

            @Override
            public void serverHeartbeatFailed(ServerHeartbeatFailedEvent e) {
                if (counting.get()) failed.incrementAndGet();
            }
        };
        long hbms = Long.parseLong(args[2]);
        MongoClientSettings s = MongoClientSettings.builder()
                .applyConnectionString(new ConnectionString(args[0]))
                .applyToServerSettings(b -> b.heartbeatFrequency(hbms, TimeUnit.MILLISECONDS)
                        .addServerMonitorListener(l))
                .applyToClusterSettings(b -> b.serverSelectionTimeout(5, TimeUnit.SECONDS))
                .build();
        try (MongoClient c = MongoClients.create(s)) {
            c.getDatabase("admin").runCommand(new Document("ping", 1));
            counting.set(true);
            Thread.sleep((long) (Double.parseDouble(args[1]) * 1000));
            counting.set(false);
        }
        System.out.printf("{\"started\": %d, \"succeeded\": %d, \"awaited\": %d, \"failed\": %d, "
                + "\"driver\": \"java %s\"}%n", started.get(), succeeded.get(), awaited.get(), failed.get(),
                com.mongodb.internal.build.MongoDriverVersion.VERSION);
    }
}
