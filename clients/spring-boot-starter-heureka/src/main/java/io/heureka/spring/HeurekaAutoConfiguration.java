package io.heureka.spring;

import com.netflix.discovery.EurekaClient;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cache.Cache;
import org.springframework.cloud.loadbalancer.cache.LoadBalancerCacheManager;
import org.springframework.cloud.loadbalancer.core.CachingServiceInstanceListSupplier;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;

/**
 * Makes Spring Cloud Netflix's Eureka client follow heureka by blocking
 * queries (HeurekaRegistryWatcher) and keeps Spring Cloud LoadBalancer's
 * instance cache from holding a stale list after a change.
 */
@AutoConfiguration(afterName = "org.springframework.cloud.netflix.eureka.EurekaClientAutoConfiguration")
@ConditionalOnClass(name = "org.springframework.cloud.netflix.eureka.CloudEurekaClient")
@ConditionalOnProperty(name = "heureka.enabled", matchIfMissing = true)
@ConditionalOnProperty(name = "eureka.client.enabled", matchIfMissing = true)
@EnableConfigurationProperties(HeurekaProperties.class)
public class HeurekaAutoConfiguration {
    private static final Log log = LogFactory.getLog(HeurekaAutoConfiguration.class);

    @Bean
    public HeurekaRegistryWatcher heurekaRegistryWatcher(ObjectProvider<EurekaClient> eurekaClient,
            HeurekaProperties properties, ObjectProvider<HeurekaRegistryListener> listeners,
            ObjectProvider<HeurekaSubsetConfigurer> subset) {
        return new HeurekaRegistryWatcher(eurekaClient, properties, listeners, subset.getIfAvailable());
    }

    /**
     * heureka.subset: the Eureka client's own fetch is turned off before the
     * client is made (a post-processor, hence static and early).
     */
    @Bean
    @ConditionalOnProperty(name = "heureka.subset", havingValue = "true")
    static HeurekaSubsetConfigurer heurekaSubsetConfigurer(Environment environment) {
        return new HeurekaSubsetConfigurer(environment);
    }

    /**
     * LoadBalancer keeps each service's instance list for 35 s by default
     * (spring.cloud.loadbalancer.cache.ttl); after a change it is emptied, so
     * the next choice reads the refreshed copy.
     */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.cloud.loadbalancer.cache.LoadBalancerCacheManager")
    static class LoadBalancerCacheEviction {
        // LoadBalancer declares its cache manager with autowireCandidate =
        // false (so it never stands in for the application's own), so it is
        // looked up by type rather than injected.
        @Bean
        HeurekaRegistryListener heurekaLoadBalancerCacheEviction(ListableBeanFactory beans) {
            return () -> {
                var managers = beans.getBeansOfType(LoadBalancerCacheManager.class);
                managers.values().forEach(m -> {
                    Cache cache = m.getCache(CachingServiceInstanceListSupplier.SERVICE_INSTANCE_CACHE_NAME);
                    if (cache != null) {
                        cache.clear();
                    }
                });
                if (log.isDebugEnabled()) {
                    log.debug("heureka: emptied LoadBalancer's instance cache in " + managers.keySet());
                }
            };
        }
    }
}
