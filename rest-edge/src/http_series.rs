//! The request metrics' series, looked up once each: asking the registry on every request builds the
//! series' key (its labels, the route's text, the status as text) and hashes it. The series are bounded:
//! methods are a fixed set (`method_label`), routes are templates or `unmatched`, statuses the edge's own.

use std::{collections::HashMap, sync::RwLock};

use metrics::{Counter, Histogram};

/// One series pair: the request count (by status) and the latency histogram of a method on a route.
struct Series {
    requests: Counter,
    duration: Histogram,
}

/// The series of each method and status seen on one route (a handful: a short list beats a map).
type RouteSeries = Vec<(&'static str, u16, Series)>;

#[derive(Default)]
pub struct HttpSeries {
    by_route: RwLock<HashMap<String, RouteSeries>>,
}

impl HttpSeries {
    /// Counts a request of `method` on `route` answered with `status` after `elapsed` seconds, registering
    /// its series on first use.
    pub fn record(&self, method: &'static str, route: &str, status: u16, elapsed: f64) {
        let count = |series: &Series| {
            series.requests.increment(1);
            series.duration.record(elapsed);
        };
        if let Some(series) = self.read().get(route).and_then(|entries| find(entries, method, status)) {
            return count(series);
        }
        let mut by_route = self.by_route.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entries = by_route.entry(route.to_owned()).or_default();
        if let Some(series) = find(entries, method, status) {
            return count(series);
        }
        let series = Series {
            requests: metrics::counter!("frontdesk_http_requests_total", "method" => method,
                "route" => route.to_owned(), "status" => status.to_string()),
            duration: metrics::histogram!("frontdesk_http_request_duration_seconds", "method" => method,
                "route" => route.to_owned()),
        };
        count(&series);
        entries.push((method, status, series));
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, RouteSeries>> {
        self.by_route.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn find<'a>(entries: &'a RouteSeries, method: &str, status: u16) -> Option<&'a Series> {
    entries
        .iter()
        .find(|(m, s, _)| *m == method && *s == status)
        .map(|(_, _, series)| series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_series_per_method_route_and_status() {
        let series = HttpSeries::default();
        for _ in 0..3 {
            for (method, status) in [("GET", 200), ("GET", 404), ("POST", 200)] {
                series.record(method, "/v1/deals", status, 0.001);
            }
            series.record("GET", "unmatched", 404, 0.001);
        }
        let by_route = series.read();
        assert_eq!(by_route.len(), 2);
        assert_eq!(by_route["/v1/deals"].len(), 3);
        assert_eq!(by_route["unmatched"].len(), 1);
    }
}
