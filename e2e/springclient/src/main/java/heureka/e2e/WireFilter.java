package heureka.e2e;

import jakarta.ws.rs.client.ClientRequestContext;
import jakarta.ws.rs.client.ClientRequestFilter;
import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.MediaType;

/**
 * A request filter for eureka-client's Jersey 3 transport. It tags every
 * request with the client's name (X-Heureka-E2E-Client), so the test's
 * recording proxy can tell the clients apart, and in XML mode switches the
 * wire format to XML.
 *
 * <p>Why a filter: the Jersey 3 transport (AbstractJersey3EurekaHttpClient)
 * hard-codes "Accept: application/json" and posts registrations with
 * Entity.json, and EurekaClientConfig's encoder/decoder names only choose the
 * JSON codec. Its message body provider (DiscoveryJerseyProvider) does read
 * and write XML with Eureka's XStream codec when a request or response says
 * application/xml, and filters are the transport's extension point
 * (AbstractDiscoveryClientOptionalArgs.setAdditionalFilters).
 */
public class WireFilter implements ClientRequestFilter {
    private final String client;
    private final boolean xml;

    public WireFilter(String client, boolean xml) {
        this.client = client;
        this.xml = xml;
    }

    @Override
    public void filter(ClientRequestContext request) {
        request.getHeaders().putSingle("X-Heureka-E2E-Client", client);
        if (!xml) {
            return;
        }
        request.getHeaders().putSingle(HttpHeaders.ACCEPT, MediaType.APPLICATION_XML);
        // Registrations carry an InstanceInfo: written as XML by the
        // transport's own provider. Heartbeats and status updates carry the
        // placeholder string "{}" the transport adds for Jersey's sake; the
        // server reads no body there, so it is left as it is.
        if (request.hasEntity() && !(request.getEntity() instanceof String)) {
            request.setEntity(request.getEntity(), request.getEntityAnnotations(), MediaType.APPLICATION_XML_TYPE);
        }
    }
}
