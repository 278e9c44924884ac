package io.heureka.spring;

import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.EurekaClient;
import com.netflix.discovery.EurekaClientConfig;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URI;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.cloud.util.ProxyUtils;
import org.springframework.context.SmartLifecycle;

/**
 * Follows heureka by blocking queries and refreshes the Eureka client's own
 * registry copy the moment heureka reports a change.
 *
 * <p>One thread per watched document (the whole registry's delta,
 * {@code apps/delta}, or each subscribed application, {@code apps/NAME})
 * sends {@code HEAD apps/delta?index=N&wait=20s} to one of the client's own service URLs:
 * heureka answers when the document's version ({@code X-Heureka-Index}) is
 * above N, with headers only. A changed version wakes the refresh thread,
 * which runs the Netflix DiscoveryClient's own registry refresh (the one its
 * 30 s timer runs: a delta fetch through its own transport, with its own
 * failover and hash check) and then the listeners, which empty
 * LoadBalancer's instance cache. The copy stays the Eureka client's: it is
 * what DiscoveryClient, LoadBalancer, Gateway and Feign read, and it is kept
 * through outages as the stock client keeps it.
 *
 * <p>A server that answers without {@code X-Heureka-Index} is not heureka:
 * the watcher logs that once and stops, leaving the stock fetch. A node that
 * fails, refuses or does not answer within the wait is failed over to the
 * next service URL.
 */
public class HeurekaRegistryWatcher implements SmartLifecycle {
    /** The header that carries a registry document's version. */
    public static final String INDEX_HEADER = "X-Heureka-Index";

    private static final Log log = LogFactory.getLog(HeurekaRegistryWatcher.class);
    private static final Duration GRACE = Duration.ofSeconds(5);

    private final ObjectProvider<EurekaClient> eurekaClient;
    private final HeurekaProperties properties;
    private final ObjectProvider<HeurekaRegistryListener> listeners;

    private volatile boolean running;
    private final AtomicBoolean fellBack = new AtomicBoolean();
    private final AtomicBoolean announced = new AtomicBoolean();
    private final AtomicLong refreshes = new AtomicLong();
    private final AtomicLong changes = new AtomicLong();
    private final Object dirtyLock = new Object();
    private boolean dirty;
    private final List<Thread> threads = new ArrayList<>();
    private volatile List<String> watched = List.of();
    private HttpClient http;
    private ScheduledExecutorService followUps;
    private Method refreshRegistry;
    private Field updateLock;

    public HeurekaRegistryWatcher(ObjectProvider<EurekaClient> eurekaClient, HeurekaProperties properties,
            ObjectProvider<HeurekaRegistryListener> listeners) {
        this.eurekaClient = eurekaClient;
        this.properties = properties;
        this.listeners = listeners;
    }

    /** How many changes heureka reported and how many refreshes they caused (for tests and metrics). */
    public long getChanges() {
        return changes.get();
    }

    public long getRefreshes() {
        return refreshes.get();
    }

    /** Whether the watcher gave way to the stock fetch (a server without blocking queries, or an unknown client). */
    public boolean isFallenBack() {
        return fellBack.get();
    }

    @Override
    public synchronized void start() {
        if (running) {
            return;
        }
        DiscoveryClient client = client();
        if (client == null) {
            return;
        }
        if (!client.getEurekaClientConfig().shouldFetchRegistry()) {
            log.info("heureka: eureka.client.fetch-registry is false, nothing to follow");
            return;
        }
        try {
            refreshRegistry = DiscoveryClient.class.getDeclaredMethod("refreshRegistry");
            refreshRegistry.setAccessible(true);
            updateLock = DiscoveryClient.class.getDeclaredField("fetchRegistryUpdateLock");
            updateLock.setAccessible(true);
        } catch (ReflectiveOperationException | RuntimeException e) {
            fallBack("this eureka-client has no DiscoveryClient.refreshRegistry to call (" + e + ")");
            return;
        }
        running = true;
        http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(properties.getConnectTimeout()).build();
        followUps = Executors.newSingleThreadScheduledExecutor(r -> daemon(r, "heureka-follow-up"));
        threads.add(daemon(this::refreshLoop, "heureka-refresh"));
        LinkedHashSet<String> docs = new LinkedHashSet<>();
        for (String app : properties.getSubscribe()) {
            if (app != null && !app.isBlank()) {
                docs.add("apps/" + URLEncoder.encode(app.trim().toUpperCase(Locale.ROOT), StandardCharsets.UTF_8));
            }
        }
        if (docs.isEmpty()) {
            // The delta document: the one the Eureka client's refresh reads,
            // so a change is waited for until it is in the delta.
            docs.add("apps/delta");
        }
        watched = List.copyOf(docs);
        for (String doc : docs) {
            threads.add(daemon(() -> watch(doc), "heureka-watch-" + doc));
        }
        threads.forEach(Thread::start);
    }

    @Override
    public synchronized void stop() {
        running = false;
        threads.forEach(Thread::interrupt);
        threads.clear();
        if (followUps != null) {
            followUps.shutdownNow();
        }
    }

    @Override
    public boolean isRunning() {
        return running;
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    /** The Netflix DiscoveryClient behind Spring's (refresh-scoped) EurekaClient bean, or null. */
    private DiscoveryClient client() {
        EurekaClient bean = eurekaClient.getIfAvailable();
        if (bean == null) {
            return null;
        }
        Object target = ProxyUtils.getTargetObject(bean);
        if (target instanceof DiscoveryClient dc) {
            return dc;
        }
        fallBack("the EurekaClient bean is a " + target.getClass().getName() + ", not Netflix's DiscoveryClient");
        return null;
    }

    private void fallBack(String why) {
        if (fellBack.compareAndSet(false, true)) {
            log.warn("heureka: " + why + "; the Eureka client keeps its stock registry fetch "
                    + "(eureka.client.registry-fetch-interval-seconds) and LoadBalancer its cache");
        }
        running = false;
    }

    // ---- watching

    private void watch(String doc) {
        long index = 0;
        boolean seen = false;
        int next = 0;
        int failedInARow = 0;
        long waitSecs = Math.max(1, properties.getWait().toSeconds());
        while (running && !Thread.currentThread().isInterrupted()) {
            DiscoveryClient client = client();
            if (client == null) {
                return;
            }
            List<String> urls = serviceUrls(client.getEurekaClientConfig());
            if (urls.isEmpty()) {
                sleep(Duration.ofSeconds(1));
                continue;
            }
            String base = urls.get(Math.floorMod(next, urls.size()));
            long start = System.nanoTime();
            try {
                HttpResponse<Void> r = http.send(request(base, doc + "?index=" + index + "&wait=" + waitSecs + "s",
                        Duration.ofSeconds(waitSecs).plus(GRACE)), HttpResponse.BodyHandlers.discarding());
                int code = r.statusCode();
                Optional<String> header = r.headers().firstValue(INDEX_HEADER);
                if (header.isEmpty()) {
                    if (code == 200 || (code == 404 && doc.startsWith("apps/") && !doc.equals("apps/delta") && isPlainEureka(base))) {
                        fallBack(redact(base) + " answered without " + INDEX_HEADER + ", so it is a Eureka server"
                                + " without blocking queries, not heureka");
                        return;
                    }
                    if (code == 404 && index != 0) {
                        // The subscribed application is gone: that is the change.
                        index = 0;
                        changed();
                        continue;
                    }
                    if (code == 404) {
                        // Still absent after the wait (or a server that does not wait: not too often).
                        if (Duration.ofNanos(System.nanoTime() - start).toMillis() < 1000) {
                            sleep(Duration.ofSeconds(1));
                        }
                        continue;
                    }
                    throw new IOException("HTTP " + code);
                }
                if (code >= 500) {
                    throw new IOException("HTTP " + code);
                }
                long n = Long.parseLong(header.get().trim());
                if (announced.compareAndSet(false, true)) {
                    log.info("heureka: following " + redact(base) + " by blocking queries on "
                            + String.join(", ", watched) + "; registry changes are fetched at once");
                }
                failedInARow = 0;
                boolean moved = n != index;
                if (!seen || moved) {
                    // The first answer also refreshes: a change between the
                    // client's start-up fetch and now.
                    changed();
                }
                if (seen && !moved && Duration.ofNanos(System.nanoTime() - start).toMillis() < 100) {
                    // Answered at once, unchanged: this node does not block. Next one.
                    next++;
                    sleep(Duration.ofSeconds(1));
                }
                index = n;
                seen = true;
            } catch (InterruptedException e) {
                return;
            } catch (IOException | RuntimeException e) {
                if (!running) {
                    return;
                }
                next++;
                failedInARow++;
                if (log.isDebugEnabled()) {
                    log.debug("heureka: blocking query on " + redact(base) + " failed (" + e + "); trying the next service URL");
                }
                if (failedInARow % urls.size() == 0) {
                    // Every service URL failed: back off, up to 5 s.
                    sleep(Duration.ofMillis(Math.min(5000, 250L * (failedInARow / urls.size()))));
                }
            }
        }
    }

    /** A 404 without the header for a subscribed application: a plain Eureka server if its apps document has none either. */
    private boolean isPlainEureka(String base) {
        try {
            HttpResponse<Void> r = http.send(request(base, "apps", Duration.ofSeconds(10)),
                    HttpResponse.BodyHandlers.discarding());
            return r.statusCode() == 200 && r.headers().firstValue(INDEX_HEADER).isEmpty();
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private HttpRequest request(String base, String pathAndQuery, Duration timeout) {
        URI u = URI.create(base);
        String auth = u.getRawUserInfo();
        String path = u.getRawPath() == null ? "/" : u.getRawPath();
        if (!path.endsWith("/")) {
            path += "/";
        }
        URI target = URI.create(u.getScheme() + "://" + u.getRawAuthority().substring(auth == null ? 0 : auth.length() + 1)
                + path + pathAndQuery);
        HttpRequest.Builder b = HttpRequest.newBuilder(target).method("HEAD", HttpRequest.BodyPublishers.noBody())
                .timeout(timeout).header("Accept", "application/json");
        if (auth != null) {
            String plain = URLDecoder.decode(auth, StandardCharsets.UTF_8);
            b.header("Authorization", "Basic " + Base64.getEncoder().encodeToString(plain.getBytes(StandardCharsets.UTF_8)));
        }
        return b.build();
    }

    private static String redact(String url) {
        return url.replaceFirst("//[^/@]*@", "//");
    }

    /** The client's service URLs, its own zone's first, as the Eureka client lists them. */
    static List<String> serviceUrls(EurekaClientConfig config) {
        LinkedHashSet<String> out = new LinkedHashSet<>();
        String region = config.getRegion();
        String[] zones = config.getAvailabilityZones(region == null ? "us-east-1" : region);
        if (zones != null) {
            for (String z : zones) {
                List<String> urls = config.getEurekaServerServiceUrls(z);
                if (urls != null) {
                    out.addAll(urls);
                }
            }
        }
        List<String> def = config.getEurekaServerServiceUrls("defaultZone");
        if (def != null) {
            out.addAll(def);
        }
        List<String> list = new ArrayList<>();
        for (String s : out) {
            if (s != null && !s.isBlank()) {
                list.add(s.trim());
            }
        }
        return list;
    }

    // ---- refreshing

    private void changed() {
        changes.incrementAndGet();
        markDirty();
        for (Duration d : properties.getFollowUp()) {
            if (d == null || d.isNegative() || d.isZero() || followUps == null || followUps.isShutdown()) {
                continue;
            }
            try {
                followUps.schedule(this::markDirty, d.toMillis(), TimeUnit.MILLISECONDS);
            } catch (RuntimeException ignored) {
                // shutting down
            }
        }
    }

    private void markDirty() {
        synchronized (dirtyLock) {
            dirty = true;
            dirtyLock.notifyAll();
        }
    }

    private void refreshLoop() {
        while (running) {
            synchronized (dirtyLock) {
                while (!dirty) {
                    try {
                        dirtyLock.wait();
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                dirty = false;
            }
            refresh();
        }
    }

    /**
     * Runs the DiscoveryClient's own refresh. It holds the client's registry
     * update lock while doing so (it is reentrant), so a refresh of the
     * client's timer that is under way finishes first instead of making this
     * one give up.
     */
    private void refresh() {
        DiscoveryClient client = client();
        if (client == null) {
            return;
        }
        try {
            Lock lock = (Lock) updateLock.get(client);
            lock.lock();
            try {
                refreshRegistry.invoke(client);
            } finally {
                lock.unlock();
            }
            refreshes.incrementAndGet();
        } catch (IllegalAccessException | InvocationTargetException | RuntimeException e) {
            log.warn("heureka: refreshing the Eureka client's registry failed: " + e);
            return;
        }
        if (log.isDebugEnabled()) {
            log.debug("heureka: refreshed the Eureka client's registry");
        }
        for (HeurekaRegistryListener l : listeners) {
            try {
                l.registryChanged();
            } catch (RuntimeException e) {
                log.warn("heureka: registry listener failed: " + e);
            }
        }
    }

    private static void sleep(Duration d) {
        try {
            Thread.sleep(d.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
