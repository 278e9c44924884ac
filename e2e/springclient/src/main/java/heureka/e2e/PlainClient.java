package heureka.e2e;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.appinfo.InstanceInfo;
import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.Jersey3DiscoveryClientOptionalArgs;
import com.netflix.discovery.shared.Application;
import com.netflix.discovery.shared.resolver.EndpointRandomizer;
import com.netflix.discovery.shared.resolver.EurekaEndpoint;
import com.netflix.discovery.shared.transport.jersey3.Jersey3TransportClientFactories;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import org.springframework.cloud.commons.util.InetUtils;
import org.springframework.cloud.commons.util.InetUtilsProperties;
import org.springframework.cloud.netflix.eureka.EurekaClientConfigBean;
import org.springframework.cloud.netflix.eureka.EurekaInstanceConfigBean;
import org.springframework.cloud.netflix.eureka.InstanceInfoFactory;

/**
 * Netflix's plain eureka-client (its DiscoveryClient with its own Jersey
 * transport, no Spring context). System properties: plain.app, plain.id,
 * plain.port, plain.serviceUrls (comma-separated), plain.codec (json, the default, or xml: see
 * WireFilter). It registers as UP, then prints one line per
 * second: "apps {APP=[id:STATUS, ...], ...}". On SIGTERM it shuts the client
 * down, which cancels its registration, and prints "cancelled".
 */
public class PlainClient {
    /** An endpoint "randomizer" that keeps the configured order. */
    static final class KeepOrder implements EndpointRandomizer {
        @Override
        public <T extends EurekaEndpoint> List<T> randomize(List<T> list) {
            return list;
        }
    }

    public static void main(String[] args) throws Exception {
        // Netflix's archaius-based config classes need archaius, which is not
        // on this class path; the config interfaces are filled from plain
        // bean implementations instead (no Spring context is started).
        EurekaInstanceConfigBean instanceConfig = new EurekaInstanceConfigBean(new InetUtils(new InetUtilsProperties()));
        instanceConfig.setAppname(System.getProperty("plain.app", "PLAINAPP"));
        instanceConfig.setInstanceId(System.getProperty("plain.id", "plain-1"));
        instanceConfig.setHostname("127.0.0.1");
        instanceConfig.setIpAddress("127.0.0.1");
        instanceConfig.setNonSecurePort(Integer.getInteger("plain.port", 8080));
        instanceConfig.setLeaseRenewalIntervalInSeconds(1);
        instanceConfig.setLeaseExpirationDurationInSeconds(30);
        EurekaClientConfigBean clientConfig = new EurekaClientConfigBean();
        clientConfig.setServiceUrl(Map.of("defaultZone", System.getProperty("plain.serviceUrls")));
        clientConfig.setRegistryFetchIntervalSeconds(1);
        clientConfig.setInstanceInfoReplicationIntervalSeconds(1);
        clientConfig.setInitialInstanceInfoReplicationIntervalSeconds(1);
        InstanceInfo info = new InstanceInfoFactory().create(instanceConfig);
        ApplicationInfoManager manager = new ApplicationInfoManager(instanceConfig, info);
        // Keep the configured order of service URLs, so the first one is used first.
        Jersey3DiscoveryClientOptionalArgs optionalArgs = new Jersey3DiscoveryClientOptionalArgs();
        optionalArgs.setAdditionalFilters(List.of(new WireFilter("plain", "xml".equals(System.getProperty("plain.codec")))));
        DiscoveryClient client = new DiscoveryClient(manager, clientConfig,
                new Jersey3TransportClientFactories(), optionalArgs, new KeepOrder());
        manager.setInstanceStatus(InstanceInfo.InstanceStatus.UP);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            client.shutdown();
            System.out.println("cancelled");
            System.out.flush();
            done.countDown();
        }));
        while (done.getCount() > 0) {
            TreeMap<String, List<String>> apps = new TreeMap<>();
            for (Application app : client.getApplications().getRegisteredApplications()) {
                apps.put(app.getName(), app.getInstancesAsIsFromEureka().stream()
                        .map(i -> i.getId() + ":" + i.getStatus()).sorted().toList());
            }
            System.out.println("apps " + apps);
            System.out.flush();
            Thread.sleep(1000);
        }
    }
}
