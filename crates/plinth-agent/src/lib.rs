//! The Destination-side agent: applying a state-store path to a cluster, running health
//! checks and writing HealthRecords. Not implemented yet; Destinations are served today
//! by any GitOps agent (Flux, Argo CD) reading the state store Plinth writes.
