package heureka.e2e;

import com.netflix.spectator.api.Counter;
import com.netflix.spectator.api.DefaultRegistry;
import com.netflix.spectator.api.Registry;
import com.netflix.spectator.api.Spectator;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestTemplate;

/**
 * What the remote-regions test (e2e/regions_spring_test.go) asks the app:
 * GET /call?service=ID calls http://ID/ through Spring Cloud LoadBalancer
 * and returns the answer; GET /reconciles reports the Netflix
 * DiscoveryClient's own count of reconcile hash mismatches (its Spectator
 * counter DiscoveryClient_ReconcileHashCodeMismatch), next to the count of
 * its log lines about them (CountingAppender).
 */
@RestController
public class RegionCalls {
    /** The client's Spectator meters; empty unless installMetrics ran before it started. */
    static final Registry METRICS = new DefaultRegistry();
    private static volatile boolean installed;

    /**
     * Adds METRICS to Spectator's global registry, where eureka-client creates
     * its counters: without a registry there they count nothing. Call it
     * before the Spring context starts.
     */
    static void installMetrics() {
        Spectator.globalRegistry().add(METRICS);
        installed = true;
    }

    private final RestTemplate rest;

    public RegionCalls(@LoadBalanced RestTemplate rest) {
        this.rest = rest;
    }

    @GetMapping("/call")
    public ResponseEntity<Map<String, Object>> call(@RequestParam("service") String service) {
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            out.put("answer", rest.getForObject("http://" + service + "/", String.class));
            return ResponseEntity.ok(out);
        } catch (RuntimeException e) {
            out.put("error", e.toString());
            return ResponseEntity.status(502).body(out);
        }
    }

    @GetMapping("/reconciles")
    public Map<String, Object> reconciles() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("installed", installed);
        out.put("counter", METRICS.counters()
                .filter(c -> c.id().name().equals("DiscoveryClient_ReconcileHashCodeMismatch"))
                .mapToLong(Counter::count).sum());
        out.put("logged", CountingAppender.hashMismatches.get());
        return out;
    }
}
