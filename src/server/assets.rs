//! The page and its files, compiled into the binary (no CDN, no files beside the
//! binary, works offline): `web/index.html`, its scripts (`web/app.js`: asking, answers
//! and the conversation's thread; `web/account.js`: sign-in; `web/verify.js`: Correct,
//! Wrong and saving a correction; `web/evaluation.js`: the evaluation card;
//! `web/rows.js`: CSV and TSV), `web/style.css`, the icon, and
//! Chart.js 4 from npm with its licence (`web/vendor/`).

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

/// One embedded file and the path it is served at.
#[derive(Debug)]
pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

pub const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../../web/index.html"),
    },
    Asset {
        path: "/assets/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../web/app.js"),
    },
    Asset {
        path: "/assets/rows.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../web/rows.js"),
    },
    Asset {
        path: "/assets/evaluation.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../web/evaluation.js"),
    },
    Asset {
        path: "/assets/account.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../web/account.js"),
    },
    Asset {
        path: "/assets/verify.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../web/verify.js"),
    },
    Asset {
        path: "/assets/style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../web/style.css"),
    },
    Asset {
        path: "/favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../../web/favicon.svg"),
    },
    Asset {
        path: "/assets/vendor/chart.umd.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../web/vendor/chart.umd.min.js"),
    },
    Asset {
        path: "/assets/vendor/chart.js.LICENSE.md",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../../web/vendor/chart.js.LICENSE.md"),
    },
];

/// Serves one file. `no-cache` makes the browser revalidate, so a new binary's page is
/// never mixed with an old cached script.
pub fn serve(asset: &'static Asset) -> Response {
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
