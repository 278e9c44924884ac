package heureka.e2e;

import java.time.Duration;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.web.client.RestTemplate;

/**
 * A @LoadBalanced RestTemplate: Spring Cloud LoadBalancer resolves the host
 * of http://{service-id}/ URLs through the DiscoveryClient, as applications
 * call each other. RegionCalls uses it.
 */
@Configuration(proxyBeanMethods = false)
public class LoadBalancedConfig {
    @Bean
    @LoadBalanced
    RestTemplate loadBalancedRestTemplate() {
        SimpleClientHttpRequestFactory f = new SimpleClientHttpRequestFactory();
        f.setConnectTimeout(Duration.ofSeconds(1));
        f.setReadTimeout(Duration.ofSeconds(3));
        return new RestTemplate(f);
    }
}
