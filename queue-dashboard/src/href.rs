//! User data in the URLs the pages emit: every queue name, key or path a
//! link, form action or redirect carries is percent-encoded, so that `/`,
//! `#`, `?`, `&` or `%` in a name stay part of it.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but the unreserved characters of RFC 3986 (letters, digits,
/// `-`, `.`, `_`, `~`): safe as one path segment and as one query value.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `text` percent-encoded as one path segment or one query value.
pub(crate) fn component(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::component;

    #[test]
    fn reserved_characters_are_encoded() {
        assert_eq!(
            component("a/b#c?d&e=f%g h"),
            "a%2Fb%23c%3Fd%26e%3Df%25g%20h"
        );
        assert_eq!(component("émails-1.x_~"), "%C3%A9mails-1.x_~");
    }
}
