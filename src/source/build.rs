//! The source of a `sources:` entry, by kind.

use super::nvml;
use super::reading::Source;
use super::scrape;
use crate::config::{SourceKind, SourceSpec};

/// Builds the scraper for a spec. `url` must be resolved for engine and dcgm sources.
pub fn build(spec: &SourceSpec, client: reqwest::Client) -> Box<dyn Source> {
    match &spec.kind {
        SourceKind::Nvml => Box::new(nvml::NvmlSource::new(spec.filter.clone())),
        kind => Box::new(scrape::HttpSource::new(spec, kind.clone(), client)),
    }
}
