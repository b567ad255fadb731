//! The Connect cluster's view of a connector, for tools that change its offsets as Connect's REST
//! API does: whether the cluster has the connector and it is stopped (its config topic,
//! `ConnectConfigs`, feature `kafka`), and what the connector itself accepts ([`checks`]).
//! Above the stores: it reads the config topic with a Kafka store's client settings.

pub mod checks;
#[cfg(feature = "kafka")]
pub mod configs;

#[cfg(feature = "kafka")]
pub use configs::ConnectConfigs;
