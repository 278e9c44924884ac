package heureka.e2e;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.appinfo.InstanceInfo;
import com.netflix.discovery.EurekaClient;
import com.netflix.discovery.shared.Application;
import com.netflix.discovery.shared.transport.jersey.TransportClientFactories;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.discovery.DiscoveryClient;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * A Spring Cloud Netflix Eureka client the e2e tests drive. GET /state reports
 * what its DiscoveryClient sees and how it fetched (counted from the Netflix
 * DiscoveryClient's own log lines); POST /status changes its status through
 * ApplicationInfoManager.
 * The fetch counters come from CountingAppender (see logback-spring.xml).
 */
@SpringBootApplication
@RestController
public class SpringClientApp {
    private final DiscoveryClient discovery;
    private final EurekaClient eureka;
    private final ApplicationInfoManager infoManager;
    private final TransportClientFactories<?> transport;

    public SpringClientApp(DiscoveryClient discovery, EurekaClient eureka, ApplicationInfoManager infoManager,
            TransportClientFactories<?> transport) {
        this.discovery = discovery;
        this.eureka = eureka;
        this.infoManager = infoManager;
        this.transport = transport;
    }

    public static void main(String[] args) {
        RegionCalls.installMetrics();
        SpringApplication.run(SpringClientApp.class, args);
    }

    /** What the client sees: Spring's DiscoveryClient and the Eureka client's own applications. */
    @GetMapping("/state")
    public Map<String, Object> state() {
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, List<String>> spring = new TreeMap<>();
        for (String service : discovery.getServices()) {
            spring.put(service.toUpperCase(), discovery.getInstances(service).stream()
                    .map(ServiceInstance::getInstanceId).sorted().toList());
        }
        out.put("services", spring);
        Map<String, Map<String, String>> statuses = new TreeMap<>();
        for (Application app : eureka.getApplications().getRegisteredApplications()) {
            Map<String, String> m = new TreeMap<>();
            for (InstanceInfo in : app.getInstancesAsIsFromEureka()) {
                m.put(in.getId(), in.getStatus().name());
            }
            statuses.put(app.getName(), m);
        }
        out.put("statuses", statuses);
        out.put("appsHashCode", eureka.getApplications().getAppsHashCode());
        out.put("fullFetches", CountingAppender.fullFetches.get());
        out.put("deltaFetches", CountingAppender.deltaFetches.get());
        out.put("hashMismatches", CountingAppender.hashMismatches.get());
        out.put("deltaRefused", CountingAppender.deltaRefused.get());
        out.put("fetchErrors", CountingAppender.fetchErrors.get());
        out.put("errors", CountingAppender.errors.get());
        out.put("parseErrors", CountingAppender.parseErrors.get());
        out.put("instanceId", infoManager.getInfo().getId());
        out.put("status", infoManager.getInfo().getStatus().name());
        out.put("client", eureka.getClass().getName());
        out.put("transport", transport.getClass().getSimpleName());
        return out;
    }

    /** Sets this instance's status the way an application does. */
    @PostMapping("/status")
    public String status(@RequestParam("value") String value) {
        infoManager.setInstanceStatus(InstanceInfo.InstanceStatus.valueOf(value));
        return "ok";
    }
}
