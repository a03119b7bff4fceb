//! The HTTP client of one MCP connection as rmcp's transport sees it: our
//! reqwest client, with every request and event stream ended when the
//! connection's cancellation token is.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use tokio_util::sync::CancellationToken;

/// The reqwest client of one MCP connection, every request of which ends
/// when the connection's token is cancelled (the connection closed, or its
/// opening abandoned at the total timeout). rmcp awaits the first request
/// of a connection (`initialize` or `server/discover`) without watching its
/// own cancellation, so without this a hanging or trickling upstream would
/// keep that request, its task and its TCP connection forever.
#[derive(Clone)]
pub(super) struct Cancellable {
    pub(super) inner: reqwest::Client,
    pub(super) ct: CancellationToken,
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;
type SseStream = BoxStream<'static, Result<sse_stream::Sse, SseError>>;

impl Cancellable {
    async fn bounded<T>(&self, fut: impl Future<Output = HttpResult<T>>) -> HttpResult<T> {
        tokio::select! {
            r = fut => r,
            () = self.ct.cancelled() => Err(StreamableHttpError::Io(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "upstream connection closed",
            ))),
        }
    }

    fn bounded_stream(&self, s: SseStream) -> SseStream {
        s.take_until(self.ct.clone().cancelled_owned()).boxed()
    }

    fn bounded_answer(&self, r: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match r {
            StreamableHttpPostResponse::Sse(s, id) => {
                StreamableHttpPostResponse::Sse(self.bounded_stream(s), id)
            }
            other => other,
        }
    }
}

impl StreamableHttpClient for Cancellable {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let r = self
            .bounded(
                self.inner
                    .post_message(uri, message, session_id, auth_header, custom_headers),
            )
            .await?;
        Ok(self.bounded_answer(r))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let r = self
            .bounded(self.inner.post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            ))
            .await?;
        Ok(self.bounded_answer(r))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let r = self
            .bounded(self.inner.post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            ))
            .await?;
        Ok(self.bounded_answer(r))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        // Not cut by the token (closing a connection sends this DELETE after
        // cancelling it), but bounded all the same.
        tokio::time::timeout(
            Duration::from_secs(5),
            self.inner
                .delete_session(uri, session_id, auth_header, custom_headers),
        )
        .await
        .unwrap_or(Ok(()))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<SseStream> {
        let s = self
            .bounded(self.inner.get_stream(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
            ))
            .await?;
        Ok(self.bounded_stream(s))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<SseStream> {
        let s = self
            .bounded(self.inner.get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            ))
            .await?;
        Ok(self.bounded_stream(s))
    }
}
