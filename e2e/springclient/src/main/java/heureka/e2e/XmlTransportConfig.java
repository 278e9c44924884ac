package heureka.e2e;

import com.netflix.discovery.Jersey3DiscoveryClientOptionalArgs;
import com.netflix.discovery.shared.transport.jersey3.Jersey3TransportClientFactories;
import java.util.List;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * With heureka.codec=xml, Spring Cloud's Eureka client runs on eureka-client's
 * Jersey 3 transport with XML on the wire. Spring Cloud Netflix 4.3 declares no
 * Jersey transport itself (its own RestTemplate, RestClient and WebClient
 * transports are JSON only); an application chooses Jersey by declaring these
 * two beans, which Spring's own ones give way to (ConditionalOnMissingBean).
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnProperty(name = "heureka.codec", havingValue = "xml")
public class XmlTransportConfig {
    @Bean
    public Jersey3TransportClientFactories jersey3TransportClientFactories() {
        return Jersey3TransportClientFactories.getInstance();
    }

    @Bean
    public Jersey3DiscoveryClientOptionalArgs jersey3DiscoveryClientOptionalArgs() {
        Jersey3DiscoveryClientOptionalArgs args = new Jersey3DiscoveryClientOptionalArgs();
        args.setAdditionalFilters(List.of(new WireFilter("spring", true)));
        return args;
    }
}
