package heureka.e2e;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Counts the Netflix DiscoveryClient's own log lines about how it fetched the
 * registry: the tests read these counters instead of guessing from timing.
 */
public class CountingAppender extends AppenderBase<ILoggingEvent> {
    static final AtomicLong fullFetches = new AtomicLong();
    static final AtomicLong deltaFetches = new AtomicLong();
    static final AtomicLong hashMismatches = new AtomicLong();
    static final AtomicLong deltaRefused = new AtomicLong();
    static final AtomicLong fetchErrors = new AtomicLong();
    static final AtomicLong errors = new AtomicLong();

    @Override
    protected void append(ILoggingEvent e) {
        String m = e.getFormattedMessage();
        if (m == null) {
            return;
        }
        if (m.startsWith("Getting all instance registry info")) {
            fullFetches.incrementAndGet();
        } else if (m.startsWith("Got delta update with apps hashcode")) {
            deltaFetches.incrementAndGet();
        } else if (m.startsWith("The Reconcile hashcodes do not match")) {
            hashMismatches.incrementAndGet();
        } else if (m.startsWith("The server does not allow the delta revision")) {
            deltaRefused.incrementAndGet();
        } else if (m.startsWith("Cannot fetch registry from server")) {
            fetchErrors.incrementAndGet();
        }
        if (e.getLevel().isGreaterOrEqual(Level.ERROR)) {
            errors.incrementAndGet();
        }
    }
}
