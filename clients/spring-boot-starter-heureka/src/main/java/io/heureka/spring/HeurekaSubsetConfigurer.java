package io.heureka.spring;

import java.util.List;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.cloud.netflix.eureka.EurekaClientConfigBean;
import org.springframework.core.env.Environment;

/**
 * With heureka.subset=true and heureka.subscribe set, turns the Eureka
 * client's own registry fetch off before the client is made (so it never
 * fetches the whole registry, not even at start-up), and remembers that it
 * did: the HeurekaRegistryWatcher then fills the client's copy with the
 * subscribed applications. An application that has
 * eureka.client.fetch-registry=false itself is left as it is.
 */
public class HeurekaSubsetConfigurer implements BeanPostProcessor {
    private final Environment environment;
    private volatile boolean tookOver;

    public HeurekaSubsetConfigurer(Environment environment) {
        this.environment = environment;
    }

    /** Whether the client's own fetch was turned off, so the watcher holds the subset. */
    public boolean tookOver() {
        return tookOver;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String beanName) {
        // After initialization: the bean's @ConfigurationProperties are bound by then.
        if (bean instanceof EurekaClientConfigBean config && config.isFetchRegistry() && subscribes()) {
            config.setFetchRegistry(false);
            tookOver = true;
        }
        return bean;
    }

    private boolean subscribes() {
        Binder binder = Binder.get(environment);
        boolean subset = binder.bind("heureka.subset", Boolean.class).orElse(false);
        List<String> apps = binder.bind("heureka.subscribe", Bindable.listOf(String.class)).orElse(List.of());
        return subset && apps.stream().anyMatch(a -> a != null && !a.isBlank());
    }
}
