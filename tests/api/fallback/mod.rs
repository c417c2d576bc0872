//! Several upstreams (contract 2, 6.1): the order of a request, fallback to the
//! next upstream, per-upstream attempts before moving on, and does-not-fit
//! rejections routed on while any other 4xx is final.

mod attempts;
mod order;
mod rejections;
