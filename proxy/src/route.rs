//! Which provider API a request is for, told from its method and path alone.

use cutpoint::format::Format;
use http::Method;

/// A provider API the proxy reads requests of. Everything else passes through.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[non_exhaustive]
pub enum Route {
    /// Anthropic Messages: `POST /v1/messages`.
    AnthropicMessages,
    /// OpenAI Chat Completions: `POST /v1/chat/completions`.
    OpenAiChat,
    /// OpenAI Responses: `POST /v1/responses`.
    OpenAiResponses,
}

impl Route {
    /// The route of a request, or `None` for one passed through unread. Only `POST`
    /// to the exact path (a query string aside) is read: `/v1/messages/count_tokens`,
    /// `GET /v1/responses/{id}` and the rest go through as they came. **O(len(path))**.
    pub fn of(method: &Method, path: &str) -> Option<Route> {
        if method != Method::POST {
            return None;
        }
        match path.trim_end_matches('/') {
            "/v1/messages" => Some(Route::AnthropicMessages),
            "/v1/chat/completions" => Some(Route::OpenAiChat),
            "/v1/responses" => Some(Route::OpenAiResponses),
            _ => None,
        }
    }

    /// The transcript format of its request bodies. **O(1)**.
    pub fn format(self) -> Format {
        match self {
            Route::AnthropicMessages => Format::AnthropicMessages,
            Route::OpenAiChat => Format::OpenAiChat,
            Route::OpenAiResponses => Format::OpenAiResponses,
        }
    }

    /// Whether its errors take Anthropic's shape (else OpenAI's). **O(1)**.
    pub fn is_anthropic(self) -> bool {
        self == Route::AnthropicMessages
    }

    /// A short name, for logs and metrics labels. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            Route::AnthropicMessages => "anthropic-messages",
            Route::OpenAiChat => "openai-chat",
            Route::OpenAiResponses => "openai-responses",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_post_to_the_three_paths_is_read() {
        assert_eq!(
            Route::of(&Method::POST, "/v1/messages"),
            Some(Route::AnthropicMessages)
        );
        assert_eq!(
            Route::of(&Method::POST, "/v1/chat/completions/"),
            Some(Route::OpenAiChat)
        );
        assert_eq!(
            Route::of(&Method::POST, "/v1/responses"),
            Some(Route::OpenAiResponses)
        );
        assert_eq!(Route::of(&Method::GET, "/v1/messages"), None);
        assert_eq!(Route::of(&Method::POST, "/v1/messages/count_tokens"), None);
        assert_eq!(Route::of(&Method::POST, "/v1/responses/compact"), None);
        assert_eq!(Route::of(&Method::POST, "/v2/messages"), None);
    }
}
