//! `robots.txt`, read once per site and import, for the user agent `FrontDeskBot`. A site without a readable
//! `robots.txt` (none, an error, a body that does not parse) allows everything, as crawlers commonly do.

use std::collections::HashMap;

use reqwest::Url;
use texting_robots::Robot;

use super::fetch::{BOT_NAME, Fetcher};

/// Larger `robots.txt` files are read only this far (Google reads 500 KiB).
const MAX_ROBOTS_BYTES: usize = 512 * 1024;

#[derive(Default)]
pub struct RobotsRules {
    /// By origin (`https://host:port`); `None` when everything is allowed.
    sites: HashMap<String, Option<Robot>>,
}

impl RobotsRules {
    pub async fn allows(&mut self, fetcher: &Fetcher, url: &Url) -> bool {
        let origin = url.origin().ascii_serialization();
        if !self.sites.contains_key(&origin) {
            let robot = read(fetcher, &origin).await;
            self.sites.insert(origin.clone(), robot);
        }
        match self.sites.get(&origin) {
            Some(Some(robot)) => robot.allowed(url.as_str()),
            _ => true,
        }
    }
}

async fn read(fetcher: &Fetcher, origin: &str) -> Option<Robot> {
    let url = Url::parse(&format!("{origin}/robots.txt")).ok()?;
    let fetched = fetcher.get(&url, MAX_ROBOTS_BYTES).await.ok()?;
    parse(&fetched.body)
}

/// A `robots.txt` body's rules for `FrontDeskBot`; `None` (everything allowed) when it does not parse.
pub fn parse(body: &[u8]) -> Option<Robot> {
    Robot::new(BOT_NAME, body).ok()
}
