package io.heureka.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** The starter's settings, under {@code heureka.*} (docs/spring.md). */
@ConfigurationProperties("heureka")
public class HeurekaProperties {
    /**
     * Follow heureka by blocking queries. false leaves the application exactly
     * as without the starter.
     */
    private boolean enabled = true;

    /**
     * Applications whose changes reach the application at once (names as
     * registered, any case). Empty: every change of the registry.
     */
    private List<String> subscribe = new ArrayList<>();

    /**
     * Hold only the subscribed applications: the Eureka client fetches no
     * registry of its own (eureka.client.fetch-registry is turned off before
     * it starts), and its copy is the subscribed applications' documents,
     * each fetched when it changes. Needs subscribe.
     */
    private boolean subset = false;

    /** How long one blocking query waits on the server before it answers unchanged. */
    private Duration wait = Duration.ofSeconds(20);

    /** Connect timeout of a blocking query; an unreachable node is failed over after it. */
    private Duration connectTimeout = Duration.ofSeconds(2);

    /**
     * Further refreshes this long after each change (empty: none), for a
     * Eureka client fetching from a node that had not applied the change yet
     * when the first refresh asked, and for a LoadBalancer lookup that wrote
     * the old list back into its cache just after it was emptied.
     */
    private List<Duration> followUp = new ArrayList<>(List.of(Duration.ofMillis(50), Duration.ofMillis(300)));

    public boolean isEnabled() {
        return enabled;
    }

    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    public List<String> getSubscribe() {
        return subscribe;
    }

    public void setSubscribe(List<String> subscribe) {
        this.subscribe = subscribe;
    }

    public boolean isSubset() {
        return subset;
    }

    public void setSubset(boolean subset) {
        this.subset = subset;
    }

    public Duration getWait() {
        return wait;
    }

    public void setWait(Duration wait) {
        this.wait = wait;
    }

    public Duration getConnectTimeout() {
        return connectTimeout;
    }

    public void setConnectTimeout(Duration connectTimeout) {
        this.connectTimeout = connectTimeout;
    }

    public List<Duration> getFollowUp() {
        return followUp;
    }

    public void setFollowUp(List<Duration> followUp) {
        this.followUp = followUp;
    }
}
