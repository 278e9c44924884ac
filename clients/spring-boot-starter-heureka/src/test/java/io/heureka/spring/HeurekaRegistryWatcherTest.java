package io.heureka.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.appinfo.InstanceInfo;
import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.EurekaClient;
import com.netflix.discovery.shared.Application;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.support.StaticListableBeanFactory;
import org.springframework.cloud.commons.util.InetUtils;
import org.springframework.cloud.commons.util.InetUtilsProperties;
import org.springframework.cloud.netflix.eureka.EurekaClientConfigBean;
import org.springframework.cloud.netflix.eureka.EurekaInstanceConfigBean;
import org.springframework.core.env.MapPropertySource;
import org.springframework.core.env.StandardEnvironment;

/**
 * The watcher against a small fake server on 127.0.0.1: heureka's blocking
 * reads of one application's document (X-Heureka-Index, ?index=N&wait=), or
 * a plain Eureka server without them. The Eureka client is Netflix's own
 * DiscoveryClient, made as heureka.subset leaves it (it neither registers
 * nor fetches), so nothing but the watcher fills its copy.
 */
class HeurekaRegistryWatcherTest {
    private HttpServer server;
    private HeurekaRegistryWatcher watcher;
    private DiscoveryClient client;

    /** The fake server's document of ORDERS: its version and instance ids; null ids: not registered. */
    private volatile long version = 5;
    private volatile List<String> ids = List.of("o-1", "o-2");
    private volatile boolean heureka = true;
    private final Object changed = new Object();
    private final List<String> authorizations = new CopyOnWriteArrayList<>();
    private final AtomicInteger reads = new AtomicInteger();

    @AfterEach
    void stop() {
        if (watcher != null) {
            watcher.stop();
        }
        if (client != null) {
            client.shutdown();
        }
        if (server != null) {
            server.stop(0);
        }
    }

    /**
     * Starts the fake server on a free port below 32768, in the range the Go
     * tests take random ports from (22000-31999): the Go container tests
     * publish fixed ports below it.
     */
    private String startServer() throws IOException {
        for (int attempt = 0; ; attempt++) {
            int port = ThreadLocalRandom.current().nextInt(22000, 32000);
            try {
                server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 50);
                break;
            } catch (BindException e) {
                if (attempt > 50) {
                    throw e;
                }
            }
        }
        server.setExecutor(Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "fake-server");
            t.setDaemon(true);
            return t;
        }));
        server.createContext("/eureka/apps/", this::serve);
        server.start();
        return "http://user:secret@127.0.0.1:" + server.getAddress().getPort() + "/eureka/";
    }

    private void serve(HttpExchange ex) throws IOException {
        reads.incrementAndGet();
        String auth = ex.getRequestHeaders().getFirst("Authorization");
        authorizations.add(auth == null ? "" : auth);
        String path = ex.getRequestURI().getPath();
        String query = ex.getRequestURI().getQuery();
        if (!path.equals("/eureka/apps/ORDERS")) {
            ex.sendResponseHeaders(404, -1);
            ex.close();
            return;
        }
        long index = -1;
        if (heureka && query != null) {
            for (String kv : query.split("&")) {
                if (kv.startsWith("index=")) {
                    index = Long.parseLong(kv.substring(6));
                }
            }
        }
        synchronized (changed) {
            long deadline = System.currentTimeMillis() + 2000;
            while (index >= 0 && version <= index && System.currentTimeMillis() < deadline) {
                try {
                    changed.wait(Math.max(1, deadline - System.currentTimeMillis()));
                } catch (InterruptedException e) {
                    break;
                }
            }
        }
        if (heureka) {
            ex.getResponseHeaders().set("X-Heureka-Index", Long.toString(version));
        }
        List<String> now = ids;
        if (now == null) {
            ex.sendResponseHeaders(404, -1);
            ex.close();
            return;
        }
        StringBuilder b = new StringBuilder("{\"application\":{\"name\":\"ORDERS\",\"instance\":[");
        for (int i = 0; i < now.size(); i++) {
            b.append(i == 0 ? "" : ",").append("{\"instanceId\":\"").append(now.get(i))
                    .append("\",\"hostName\":\"127.0.0.1\",\"app\":\"ORDERS\",\"ipAddr\":\"127.0.0.1\",\"status\":\"UP\",")
                    .append("\"port\":{\"$\":").append(8080 + i).append(",\"@enabled\":\"true\"},\"vipAddress\":\"orders\",")
                    .append("\"dataCenterInfo\":{\"@class\":\"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo\",\"name\":\"MyOwn\"}}");
        }
        byte[] body = b.append("]}}").toString().getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(200, body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }

    private void change(long newVersion, List<String> newIds) {
        synchronized (changed) {
            ids = newIds;
            version = newVersion;
            changed.notifyAll();
        }
    }

    private static StandardEnvironment environment(Map<String, Object> properties) {
        StandardEnvironment env = new StandardEnvironment();
        env.getPropertySources().addFirst(new MapPropertySource("test", properties));
        return env;
    }

    /** A Eureka client config with the application's fetch on, as an application has it. */
    private static EurekaClientConfigBean clientConfig(String serviceUrl) {
        EurekaClientConfigBean config = new EurekaClientConfigBean();
        config.setRegisterWithEureka(false);
        config.setFetchRegistry(true);
        config.setRegistryFetchIntervalSeconds(1);
        config.getServiceUrl().put("defaultZone", serviceUrl);
        return config;
    }

    /** Starts the watcher over a DiscoveryClient made from config, subscribed to ORDERS. */
    private void startWatcher(EurekaClientConfigBean config, HeurekaSubsetConfigurer configurer) {
        InetUtils inet = new InetUtils(new InetUtilsProperties());
        EurekaInstanceConfigBean instance = new EurekaInstanceConfigBean(inet);
        instance.setAppname("caller");
        instance.setHostname("127.0.0.1");
        InstanceInfo info = InstanceInfo.Builder.newBuilder().setAppName("CALLER").setHostName("127.0.0.1").build();
        client = new DiscoveryClient(new ApplicationInfoManager(instance, info), config, null);
        HeurekaProperties props = new HeurekaProperties();
        props.setSubscribe(List.of("orders"));
        props.setSubset(true);
        props.setWait(Duration.ofSeconds(1));
        StaticListableBeanFactory beans = new StaticListableBeanFactory();
        beans.addBean("eurekaClient", client);
        watcher = new HeurekaRegistryWatcher(beans.getBeanProvider(EurekaClient.class), props,
                beans.getBeanProvider(HeurekaRegistryListener.class), configurer);
        watcher.start();
    }

    /** The fake server, and the watcher with heureka.subset over a client that uses it. */
    private void startSubset() throws IOException {
        EurekaClientConfigBean config = clientConfig(startServer());
        HeurekaSubsetConfigurer configurer = new HeurekaSubsetConfigurer(
                environment(Map.of("heureka.subset", "true", "heureka.subscribe", "orders")));
        configurer.postProcessAfterInitialization(config, "eurekaClientConfigBean");
        startWatcher(config, configurer);
    }

    private static void waitFor(String what, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 10_000;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("not within 10 s: " + what);
            }
            Thread.sleep(20);
        }
    }

    private List<String> held() {
        Application app = client.getApplications().getRegisteredApplications("ORDERS");
        List<String> out = new ArrayList<>();
        if (app != null) {
            app.getInstances().forEach(i -> out.add(i.getInstanceId()));
            out.sort(null);
        }
        return out;
    }

    @Test
    void subsetConfigurerTurnsTheFetchOffOnlyWithSubscribe() {
        EurekaClientConfigBean config = clientConfig("http://127.0.0.1:1/eureka/");
        HeurekaSubsetConfigurer none = new HeurekaSubsetConfigurer(environment(Map.of("heureka.subset", "true")));
        none.postProcessAfterInitialization(config, "eurekaClientConfigBean");
        assertTrue(config.isFetchRegistry(), "no subscribe: the client's fetch stays");
        assertFalse(none.tookOver());

        HeurekaSubsetConfigurer off = new HeurekaSubsetConfigurer(environment(Map.of("heureka.subscribe", "orders")));
        off.postProcessAfterInitialization(config, "eurekaClientConfigBean");
        assertTrue(config.isFetchRegistry(), "heureka.subset unset: the client's fetch stays");

        HeurekaSubsetConfigurer on = new HeurekaSubsetConfigurer(
                environment(Map.of("heureka.subset", "true", "heureka.subscribe", "orders,payments")));
        on.postProcessAfterInitialization(config, "eurekaClientConfigBean");
        assertFalse(config.isFetchRegistry());
        assertTrue(on.tookOver());

        EurekaClientConfigBean own = clientConfig("http://127.0.0.1:1/eureka/");
        own.setFetchRegistry(false);
        HeurekaSubsetConfigurer left = new HeurekaSubsetConfigurer(
                environment(Map.of("heureka.subset", "true", "heureka.subscribe", "orders")));
        left.postProcessAfterInitialization(own, "eurekaClientConfigBean");
        assertFalse(left.tookOver(), "an application that turned its fetch off itself is left as it is");
    }

    @Test
    void serviceUrlsOwnZoneFirstWithoutRepeats() {
        EurekaClientConfigBean config = new EurekaClientConfigBean();
        config.setRegion("r1");
        config.getAvailabilityZones().put("r1", "z2,z1");
        config.getServiceUrl().put("z1", "http://a/eureka/, http://b/eureka/");
        config.getServiceUrl().put("z2", "http://c/eureka/,http://a/eureka/");
        config.getServiceUrl().put("defaultZone", "http://d/eureka/");
        assertEquals(List.of("http://c/eureka/", "http://a/eureka/", "http://b/eureka/", "http://d/eureka/"),
                HeurekaRegistryWatcher.serviceUrls(config));
    }

    @Test
    void subsetFollowsTheDocumentByBlockingReads() throws Exception {
        startSubset();
        assertTrue(watcher.isSubset());

        waitFor("ORDERS in the copy", () -> held().equals(List.of("o-1", "o-2")));
        assertEquals(2, client.getInstancesByVipAddress("orders", false).size());
        assertEquals(1, client.getApplications().getRegisteredApplications().size(), "the copy holds ORDERS only");

        int before = reads.get();
        long at = System.nanoTime();
        change(6, List.of("o-2"));
        waitFor("the change in the copy", () -> held().equals(List.of("o-2")));
        assertTrue(Duration.ofNanos(System.nanoTime() - at).toMillis() < 1000, "a blocking read answers at once");
        assertTrue(reads.get() - before <= 3, "one parked read per change, not polling: " + (reads.get() - before));

        change(7, null);
        waitFor("ORDERS out of the copy", () -> held().isEmpty());
        assertNull(client.getApplications().getRegisteredApplications("ORDERS"));
        assertFalse(watcher.isFallenBack());
        assertTrue(authorizations.stream().allMatch(a -> a.equals("Basic dXNlcjpzZWNyZXQ=")),
                "the service URL's credentials on every read: " + authorizations);
    }

    @Test
    void subsetReadsAPlainEurekaServerAtTheFetchInterval() throws Exception {
        heureka = false;
        startSubset();

        waitFor("ORDERS in the copy", () -> held().equals(List.of("o-1", "o-2")));
        assertTrue(watcher.isFallenBack());
        change(6, List.of("o-1"));
        waitFor("the change at the next read", () -> held().equals(List.of("o-1")));
        int before = reads.get();
        Thread.sleep(2500);
        int n = reads.get() - before;
        assertTrue(n >= 1 && n <= 4, "reads in 2.5 s at a 1 s interval: " + n);
    }
}
