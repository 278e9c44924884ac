package io.heureka.spring;

/**
 * Called after the Eureka client's registry copy was refreshed because
 * heureka reported a change (on the starter's refresh thread). The starter's
 * own listener empties Spring Cloud LoadBalancer's instance cache.
 */
@FunctionalInterface
public interface HeurekaRegistryListener {
    void registryChanged();
}
