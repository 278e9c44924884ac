package heureka.e2e.caller;

import io.heureka.spring.HeurekaRegistryWatcher;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import com.netflix.discovery.EurekaClient;
import com.netflix.discovery.shared.Application;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.cloud.client.discovery.DiscoveryClient;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.context.annotation.Bean;
import org.springframework.context.event.EventListener;
import org.springframework.http.HttpMethod;
import org.springframework.http.client.ClientHttpRequest;
import org.springframework.http.client.ClientHttpRequestFactory;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestTemplate;

/**
 * Calls http://{caller.target}/ through a @LoadBalanced RestTemplate every
 * caller.interval-ms on one thread, and records, per instance address
 * (host:port) LoadBalancer chose, when it was last chosen (epoch ms) and how
 * often. GET /chosen reports that; the test reads it to see when the caller
 * stopped choosing a dead instance. GET /view reports what the Eureka
 * client's registry copy holds, GET /heap the heap in use after a full
 * collection.
 */
@SpringBootApplication
@RestController
public class SpringCallerApp {
    private final Map<String, Long> lastChosen = new ConcurrentHashMap<>();
    private final Map<String, AtomicLong> timesChosen = new ConcurrentHashMap<>();
    private final AtomicLong calls = new AtomicLong();
    private final AtomicLong failures = new AtomicLong();
    private final ObjectProvider<HeurekaRegistryWatcher> watcher;
    private final DiscoveryClient discovery;
    private final ObjectProvider<EurekaClient> eureka;

    @Value("${caller.target:}")
    private String target;

    @Value("${caller.interval-ms:10}")
    private long intervalMs;

    public SpringCallerApp(ObjectProvider<HeurekaRegistryWatcher> watcher, DiscoveryClient discovery,
            ObjectProvider<EurekaClient> eureka) {
        this.watcher = watcher;
        this.discovery = discovery;
        this.eureka = eureka;
    }

    public static void main(String[] args) {
        SpringApplication.run(SpringCallerApp.class, args);
    }

    /**
     * The request factory sees the address LoadBalancer chose (its
     * interceptor has rewritten the service name by then), before the call
     * is made: a dead instance counts as chosen even when the call fails.
     */
    @Bean
    @LoadBalanced
    RestTemplate restTemplate() {
        SimpleClientHttpRequestFactory plain = new SimpleClientHttpRequestFactory();
        plain.setConnectTimeout(Duration.ofMillis(500));
        plain.setReadTimeout(Duration.ofSeconds(2));
        ClientHttpRequestFactory recording = new ClientHttpRequestFactory() {
            @Override
            public ClientHttpRequest createRequest(URI uri, HttpMethod method) throws IOException {
                String addr = uri.getHost() + ":" + uri.getPort();
                lastChosen.put(addr, System.currentTimeMillis());
                timesChosen.computeIfAbsent(addr, k -> new AtomicLong()).incrementAndGet();
                return plain.createRequest(uri, method);
            }
        };
        return new RestTemplate(recording);
    }

    @EventListener(ApplicationReadyEvent.class)
    public void startCalling(ApplicationReadyEvent e) {
        if (target.isEmpty()) {
            return;
        }
        RestTemplate rest = e.getApplicationContext().getBean(RestTemplate.class);
        Thread t = new Thread(() -> {
            while (true) {
                try {
                    rest.getForObject("http://" + target + "/", String.class);
                } catch (RuntimeException ex) {
                    failures.incrementAndGet();
                }
                calls.incrementAndGet();
                try {
                    Thread.sleep(intervalMs);
                } catch (InterruptedException ex) {
                    return;
                }
            }
        }, "caller");
        t.setDaemon(true);
        t.start();
    }

    @GetMapping("/chosen")
    public Map<String, Object> chosen() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("now", System.currentTimeMillis());
        out.put("last", new TreeMap<>(lastChosen));
        Map<String, Long> times = new TreeMap<>();
        timesChosen.forEach((k, v) -> times.put(k, v.get()));
        out.put("times", times);
        if (!target.isEmpty()) {
            // What the Eureka client's copy lists now (LoadBalancer may still hold an older list).
            out.put("listed", discovery.getInstances(target).stream()
                    .map(i -> i.getHost() + ":" + i.getPort()).sorted().toList());
        }
        out.put("calls", calls.get());
        out.put("failures", failures.get());
        HeurekaRegistryWatcher w = watcher.getIfAvailable();
        out.put("starter", w != null);
        if (w != null) {
            out.put("following", w.isRunning());
            out.put("fellBack", w.isFallenBack());
            out.put("subset", w.isSubset());
            out.put("changes", w.getChanges());
            out.put("refreshes", w.getRefreshes());
        }
        return out;
    }

    /**
     * The Eureka client's registry copy: instances per application (every
     * status) and in all.
     */
    @GetMapping("/view")
    public Map<String, Object> view() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("now", System.currentTimeMillis());
        Map<String, Integer> apps = new TreeMap<>();
        int total = 0;
        EurekaClient client = eureka.getIfAvailable();
        if (client != null) {
            for (Application a : client.getApplications().getRegisteredApplications()) {
                int n = a.getInstancesAsIsFromEureka().size();
                apps.put(a.getName(), n);
                total += n;
            }
        }
        out.put("instances", total);
        out.put("apps", apps);
        return out;
    }

    /** The heap in use after full collections (bytes), for the registry copy's footprint. */
    @GetMapping("/heap")
    public Map<String, Object> heap() throws InterruptedException {
        var mem = ManagementFactory.getMemoryMXBean();
        long used = Long.MAX_VALUE;
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(100);
            used = Math.min(used, mem.getHeapMemoryUsage().getUsed());
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("used", used);
        out.put("committed", mem.getHeapMemoryUsage().getCommitted());
        return out;
    }
}
