//! What the tool records itself (`crate::internal::metrics`): the alarm series of a store's
//! records, which `serve` reads without a buffer.

use super::{ConnectorAlarm, names};

/// Records the alarm series of `writer`'s connectors: the `stalled` and `unmoved` gauges and the
/// backwards counter (set to the count given, which the buffer keeps over its lifetimes).
pub fn record_alarms(writer: &str, alarms: &[ConnectorAlarm]) {
    for a in alarms {
        let (c, w) = (a.connector.clone(), writer.to_string());
        ::metrics::gauge!(names::CONNECTOR_STALLED, "connector" => c.clone(), "writer" => w.clone())
            .set(if a.stalled { 1.0 } else { 0.0 });
        ::metrics::gauge!(names::CONNECTOR_UNMOVED, "connector" => c.clone(), "writer" => w.clone())
            .set(a.unmoved.as_secs_f64());
        ::metrics::counter!(names::BACKWARD_MOVES, "connector" => c, "writer" => w)
            .absolute(a.backwards);
    }
}
