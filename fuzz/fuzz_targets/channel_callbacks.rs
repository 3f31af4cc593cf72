//! Provider callbacks as anyone who finds a hook URL can send them: Twilio's form posts (messages and
//! status reports) and WhatsApp's, Messenger's and Instagram's JSON, through each adapter's handshake,
//! signature check and parser. The first byte picks the adapter and the path; header lines
//! (`name: value`) come before the first NUL, the body after it.
#![no_main]

use std::{collections::BTreeMap, sync::OnceLock, time::Duration};

use bytes::Bytes;
use frontdesk_domain::channels::{
    ChannelAdapter, RawRequest,
    meta::{GraphApi, MessengerAdapter, WhatsAppAdapter},
    twilio::TwilioAdapter,
};
use frontdesk_kernel::store::entities::channels::ChannelKind;
use libfuzzer_sys::fuzz_target;

fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn adapters() -> &'static [Box<dyn ChannelAdapter>] {
    static ALL: OnceLock<Vec<Box<dyn ChannelAdapter>>> = OnceLock::new();
    ALL.get_or_init(|| {
        let http = frontdesk_kernel::integrations::http::client(Duration::from_secs(1)).expect("client");
        let graph = GraphApi {
            base_url: "http://127.0.0.1:9".to_owned(),
            version: "v21.0".to_owned(),
        };
        let twilio = config(&[
            ("account_sid", "AC0123456789abcdef0123456789abcdef"),
            ("auth_token", "12345"),
            ("from_number", "+15005550006"),
        ]);
        let meta = config(&[
            ("phone_number_id", "1234567890"),
            ("page_id", "1234567890"),
            ("access_token", "token"),
            ("app_secret", "secret"),
        ]);
        vec![
            Box::new(TwilioAdapter::new(&twilio, "http://127.0.0.1:9", http.clone()).expect("twilio")),
            Box::new(WhatsAppAdapter::new(&meta, "verify", &graph, http.clone()).expect("whatsapp")),
            Box::new(MessengerAdapter::new(ChannelKind::Messenger, &meta, "verify", &graph, http.clone()).expect("messenger")),
            Box::new(MessengerAdapter::new(ChannelKind::Instagram, &meta, "verify", &graph, http).expect("instagram")),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let all = adapters();
    let Some(callbacks) = all[usize::from(pick) % all.len()].callbacks() else {
        return;
    };
    let (head, body) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (&[][..], rest),
    };
    let headers = String::from_utf8_lossy(head)
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let request = RawRequest {
        method: if pick & 0x40 == 0 { "POST" } else { "GET" }.to_owned(),
        public_url: "https://desk.example/hooks/twilio/ch_1?hub.mode=subscribe".to_owned(),
        path_suffix: if pick & 0x80 == 0 { "" } else { "status" }.to_owned(),
        headers,
        body: Bytes::copy_from_slice(body),
    };
    let _ = callbacks.handshake(&request);
    let _ = callbacks.verify(&request);
    let _ = callbacks.parse(&request);
});
