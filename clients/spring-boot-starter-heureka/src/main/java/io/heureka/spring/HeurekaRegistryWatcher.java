package io.heureka.spring;

import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.EurekaClient;
import com.netflix.discovery.EurekaClientConfig;
import com.netflix.discovery.converters.EurekaJacksonCodec;
import com.netflix.discovery.shared.Application;
import com.netflix.discovery.shared.Applications;
import java.io.ByteArrayInputStream;
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
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
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
 *
 * <p>With heureka.subset (HeurekaSubsetConfigurer turned the client's own
 * fetch off), each subscribed application's document is read by blocking
 * GETs instead ({@code GET apps/NAME?index=N&wait=20s}); a new version's
 * body becomes that application in the client's copy, which holds the
 * subscribed applications only. Against a Eureka server without blocking
 * queries the documents are read at the client's fetch interval instead.
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
    // heureka.subset: the client's copy, the applications in it by name, and
    // the DiscoveryClient's hooks it is installed through.
    private final HeurekaSubsetConfigurer subsetConfigurer;
    private volatile boolean subset;
    private final Map<String, Application> subsetApps = new TreeMap<>();
    private Field localRegionApps;
    private Method onCacheRefreshed;
    private DiscoveryClient installedInto; // the client the copy was last put into (under subsetApps)

    public HeurekaRegistryWatcher(ObjectProvider<EurekaClient> eurekaClient, HeurekaProperties properties,
            ObjectProvider<HeurekaRegistryListener> listeners) {
        this(eurekaClient, properties, listeners, null);
    }

    public HeurekaRegistryWatcher(ObjectProvider<EurekaClient> eurekaClient, HeurekaProperties properties,
            ObjectProvider<HeurekaRegistryListener> listeners, HeurekaSubsetConfigurer subsetConfigurer) {
        this.eurekaClient = eurekaClient;
        this.properties = properties;
        this.listeners = listeners;
        this.subsetConfigurer = subsetConfigurer;
    }

    /** Whether the client's copy holds the subscribed applications only (heureka.subset). */
    public boolean isSubset() {
        return subset;
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
        subset = subsetConfigurer != null && subsetConfigurer.tookOver();
        if (!subset && !client.getEurekaClientConfig().shouldFetchRegistry()) {
            log.info("heureka: eureka.client.fetch-registry is false, nothing to follow");
            return;
        }
        try {
            if (subset) {
                localRegionApps = DiscoveryClient.class.getDeclaredField("localRegionApps");
                localRegionApps.setAccessible(true);
                onCacheRefreshed = DiscoveryClient.class.getDeclaredMethod("onCacheRefreshed");
                onCacheRefreshed.setAccessible(true);
            } else {
                refreshRegistry = DiscoveryClient.class.getDeclaredMethod("refreshRegistry");
                refreshRegistry.setAccessible(true);
                updateLock = DiscoveryClient.class.getDeclaredField("fetchRegistryUpdateLock");
                updateLock.setAccessible(true);
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            if (subset) {
                // The client's own fetch is off: without a copy to fill the application would see no registry.
                log.error("heureka: heureka.subset cannot hold the subscribed applications in this eureka-client ("
                        + e + "); remove heureka.subset");
                return;
            }
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
            threads.add(daemon(() -> {
                if (subset) {
                    watchSubset(doc);
                } else {
                    watch(doc);
                }
            }, "heureka-watch-" + doc));
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

    /** heureka.wait in whole seconds, at least one. */
    private long waitSecs() {
        return Math.max(1, properties.getWait().toSeconds());
    }

    private void watch(String doc) {
        long index = 0;
        boolean seen = false;
        Rotation rotation = new Rotation();
        while (running && !Thread.currentThread().isInterrupted()) {
            DiscoveryClient client = client();
            if (client == null) {
                return;
            }
            String base = rotation.pick(client.getEurekaClientConfig());
            if (base == null) {
                continue;
            }
            long start = System.nanoTime();
            try {
                HttpResponse<Void> r = http.send(request(base, doc + "?index=" + index + "&wait=" + waitSecs() + "s", "HEAD",
                        Duration.ofSeconds(waitSecs()).plus(GRACE)), HttpResponse.BodyHandlers.discarding());
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
                rotation.failedInARow = 0;
                boolean moved = n != index;
                if (!seen || moved) {
                    // The first answer also refreshes: a change between the
                    // client's start-up fetch and now.
                    changed();
                }
                if (seen && !moved && Duration.ofNanos(System.nanoTime() - start).toMillis() < 100) {
                    // Answered at once, unchanged: this node does not block. Next one.
                    rotation.next++;
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
                rotation.failed("blocking query", base, e);
            }
        }
    }

    /**
     * heureka.subset: follows one application's document (doc is
     * "apps/NAME") by blocking GETs and installs each new version in the
     * client's copy; a 404 removes the application from it. A server that
     * answers without X-Heureka-Index is read at the client's fetch interval
     * instead.
     */
    private void watchSubset(String doc) {
        String app = URLDecoder.decode(doc.substring("apps/".length()), StandardCharsets.UTF_8);
        Rotation rotation = new Rotation();
        boolean polling = false;
        byte[] last = null; // polling: the last document read
        long index = 0;
        boolean seen = false;
        while (running && !Thread.currentThread().isInterrupted()) {
            DiscoveryClient client = client();
            if (client == null) {
                return;
            }
            EurekaClientConfig config = client.getEurekaClientConfig();
            reinstallIfNew(client);
            String base = rotation.pick(config);
            if (base == null) {
                continue;
            }
            Duration interval = Duration.ofSeconds(Math.max(1, config.getRegistryFetchIntervalSeconds()));
            long start = System.nanoTime();
            try {
                String q = polling ? doc : doc + "?index=" + index + "&wait=" + waitSecs() + "s";
                HttpResponse<byte[]> r = http.send(request(base, q, "GET", Duration.ofSeconds(waitSecs()).plus(GRACE)),
                        HttpResponse.BodyHandlers.ofByteArray());
                int code = r.statusCode();
                Optional<String> header = r.headers().firstValue(INDEX_HEADER);
                if (header.isEmpty() && !polling && !seen && (code == 200 || (code == 404 && isPlainEureka(base)))) {
                    polling = true;
                    if (fellBack.compareAndSet(false, true)) {
                        log.warn("heureka: " + redact(base) + " answered without " + INDEX_HEADER + ", so it is a Eureka server"
                                + " without blocking queries, not heureka; the subscribed applications are fetched every "
                                + interval.toSeconds() + " s (eureka.client.registry-fetch-interval-seconds)");
                    }
                }
                if (code == 200) {
                    long n = header.map(h -> Long.parseLong(h.trim())).orElse(-1L);
                    boolean moved = polling ? !Arrays.equals(r.body(), last) : n != index;
                    if (!seen || moved) {
                        install(client, app, EurekaJacksonCodec.getInstance().readValue(Application.class,
                                new ByteArrayInputStream(r.body())));
                    }
                    last = polling ? r.body() : null;
                    if (header.isPresent() && announced.compareAndSet(false, true)) {
                        log.info("heureka: following " + redact(base) + " by blocking queries on "
                                + String.join(", ", watched) + "; the registry copy holds these applications only");
                    }
                    if (!polling && seen && !moved && Duration.ofNanos(System.nanoTime() - start).toMillis() < 100) {
                        // Answered at once, unchanged: this node does not block. Next one.
                        rotation.next++;
                        sleep(Duration.ofSeconds(1));
                    }
                    index = n;
                    seen = true;
                    rotation.failedInARow = 0;
                } else if (code == 404) {
                    // Not registered (any more): out of the copy. heureka
                    // answers this at once, so it is asked again in a second.
                    install(client, app, null);
                    last = null;
                    index = 0;
                    seen = true;
                    rotation.failedInARow = 0;
                    if (!polling && Duration.ofNanos(System.nanoTime() - start).toMillis() < 1000) {
                        sleep(Duration.ofSeconds(1));
                    }
                } else {
                    throw new IOException("HTTP " + code);
                }
                if (polling) {
                    sleep(interval);
                }
            } catch (InterruptedException e) {
                return;
            } catch (IOException | RuntimeException e) {
                if (!running) {
                    return;
                }
                rotation.failed("reading " + doc, base, e);
            }
        }
    }

    /**
     * A DiscoveryClient made again (Spring Cloud's refresh scope rebuilds it
     * after a configuration refresh) starts empty, and the documents it
     * should hold may not change for a long while: the copy is put into it.
     */
    private void reinstallIfNew(DiscoveryClient client) {
        synchronized (subsetApps) {
            if (installedInto == null || installedInto == client) {
                return;
            }
        }
        install(client, null, null);
    }

    /**
     * Puts app (null: none) into the client's copy, which is rebuilt from the
     * subscribed applications and filtered and shuffled as the client does
     * after a fetch; then the client's and LoadBalancer's listeners follow.
     */
    @SuppressWarnings("unchecked")
    private void install(DiscoveryClient client, String name, Application app) {
        synchronized (subsetApps) {
            if (name == null) {
                // the same applications, into another client
            } else if (app == null) {
                if (subsetApps.remove(name) == null) {
                    return; // not in the copy: nothing changed
                }
            } else {
                subsetApps.put(name, app);
            }
            Applications apps = new Applications();
            for (Application a : subsetApps.values()) {
                apps.addApplication(a);
            }
            apps.setAppsHashCode(apps.getReconcileHashCode());
            apps.shuffleInstances(client.getEurekaClientConfig().shouldFilterOnlyUpInstances());
            try {
                ((AtomicReference<Applications>) localRegionApps.get(client)).set(apps);
                installedInto = client;
            } catch (IllegalAccessException | RuntimeException e) {
                log.warn("heureka: installing " + name + " in the Eureka client's registry copy failed: " + e);
                return;
            }
        }
        if (log.isDebugEnabled()) {
            log.debug("heureka: " + (name == null ? "the subscribed applications put into a new Eureka client"
                    : name + (app == null ? " is not registered" : " has " + app.getInstances().size() + " instances")
                    + " in the Eureka client's registry copy"));
        }
        changed();
    }

    /** Which service URL a watching thread asks next, and how many failed in a row. */
    private final class Rotation {
        int next;
        int failedInARow;
        int urls = 1;

        /** The service URL to ask, or null (after a second) if the client has none. */
        String pick(EurekaClientConfig config) {
            List<String> list = serviceUrls(config);
            if (list.isEmpty()) {
                sleep(Duration.ofSeconds(1));
                return null;
            }
            urls = list.size();
            return list.get(Math.floorMod(next, urls));
        }

        /** A failed query: the next service URL; when every one failed in a row, a back-off of up to 5 s. */
        void failed(String what, String base, Exception e) {
            next++;
            failedInARow++;
            if (log.isDebugEnabled()) {
                log.debug("heureka: " + what + " on " + redact(base) + " failed (" + e + "); trying the next service URL");
            }
            if (failedInARow % urls == 0) {
                sleep(Duration.ofMillis(Math.min(5000, 250L * (failedInARow / urls))));
            }
        }
    }

    /** A 404 without the header for a subscribed application: a plain Eureka server if its apps document has none either. */
    private boolean isPlainEureka(String base) {
        try {
            HttpResponse<Void> r = http.send(request(base, "apps", "HEAD", Duration.ofSeconds(10)),
                    HttpResponse.BodyHandlers.discarding());
            return r.statusCode() == 200 && r.headers().firstValue(INDEX_HEADER).isEmpty();
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private HttpRequest request(String base, String pathAndQuery, String method, Duration timeout) {
        URI u = URI.create(base);
        String auth = u.getRawUserInfo();
        String path = u.getRawPath() == null ? "/" : u.getRawPath();
        if (!path.endsWith("/")) {
            path += "/";
        }
        URI target = URI.create(u.getScheme() + "://" + u.getRawAuthority().substring(auth == null ? 0 : auth.length() + 1)
                + path + pathAndQuery);
        HttpRequest.Builder b = HttpRequest.newBuilder(target).method(method, HttpRequest.BodyPublishers.noBody())
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
        if (subset) {
            // The copy was installed already; the client's listeners
            // (Spring Cloud's HeartbeatEvent) and LoadBalancer's cache follow.
            try {
                onCacheRefreshed.invoke(client);
            } catch (IllegalAccessException | InvocationTargetException | RuntimeException e) {
                log.warn("heureka: the Eureka client's cache-refreshed event failed: " + e);
            }
            refreshes.incrementAndGet();
            runListeners();
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
        runListeners();
    }

    private void runListeners() {
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
