//! loadgen-stubs: stub servers (echo, max-throughput, variable, and the variable stub's
//! prefix-cache mode, and the video generation stub) that speak the endpoint protocols.
//!
//! Start one in-process with [`StubServer::start`] on 127.0.0.1 port 0, read its
//! [`StubServer::url`], and [`StubServer::stop`] it (dropping it does the same). The
//! `llm-loadgen stub …` command is [`cli::StubCommand`] + [`cli::run`].

pub mod chat_turn;
pub mod cli;
mod config;
pub mod fault;
pub mod handler;
pub mod http;
mod listen;
pub mod plan;
pub mod prefix_cache;
pub mod render;
mod server;
mod shared;
pub mod tls;
pub mod tool_call;
pub mod variable;
pub mod video;
mod worker;

pub use chat_turn::{message_tokens, prompt_tokens, text_tokens};
pub use config::{
    load_answers, monotonic_ns, AnswerTable, BodyLog, DelayFault, FaultConfig, PrefixCacheConfig,
    ProfileHit, ProfileLog, SendLog, SentResponse, StatusFault, StubConfig, StubKind,
    TruncateFault, TruncateFraming, UsageFault, VariableConfig,
};
pub use http::ProfileAction;
pub use prefix_cache::{CacheOutcome, PrefixCacheTotals};
pub use server::{StopHandle, StubServer};
pub use shared::{StubTotals, PEER_ADDRESSES_MAX};
