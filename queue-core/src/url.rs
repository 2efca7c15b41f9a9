//! Database URLs: shown in messages never with their password, and
//! pointed at another database.

/// What stands for a hidden secret.
const MASK: &str = "***";

/// Query-string and connection-string keys whose values are secrets
/// (compared case-insensitively); any key holding `password`, `secret` or
/// `token` counts too.
const SECRET_KEYS: [&str; 7] = [
    "password",
    "pass",
    "pwd",
    "passwd",
    "secret",
    "token",
    "sslpassword",
];

fn is_secret_key(key: &str) -> bool {
    let key = percent_encoding::percent_decode_str(key.trim())
        .decode_utf8_lossy()
        .to_ascii_lowercase();
    SECRET_KEYS.contains(&key.as_str())
        || ["password", "secret", "token", "apikey", "api_key"]
            .iter()
            .any(|word| key.contains(word))
}

/// `url` with every secret replaced by `***`, for messages and logs:
/// - the password of the user-info, whatever characters it holds: it runs
///   from the `:` after the user name to the last `@` that a host name
///   follows, so an unencoded `/`, `?`, `#`, `@` or `:` in it is hidden
///   too (an `@` in the query string after a host-like word makes more be
///   hidden, never less);
/// - the values of `password`, `pass`, `pwd`, `passwd`, `secret`, `token`,
///   `sslpassword` and of any key holding `password`, `secret`, `token` or
///   `apikey`, in the query string (any case);
/// - the same keys' values in a `key=value` connection string
///   (`host=db user=app password=…`, `Server=db;Password=…`), when `url` has
///   no `://`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return redact_key_values(url);
    };
    let (authority_end, userinfo) = match userinfo_end(rest) {
        Some(at) => {
            let userinfo = &rest[..at];
            let masked = match userinfo.split_once(':') {
                Some((user, _password)) => format!("{user}:{MASK}@"),
                None => format!("{userinfo}@"),
            };
            (at + 1, masked)
        }
        None => (0, String::new()),
    };
    let rest = &rest[authority_end..];
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (host, tail) = rest.split_at(host_end);
    format!("{scheme}://{userinfo}{host}{}", redact_query(tail))
}

/// Where the user-info ends (its `@`) in what follows `scheme://`: the
/// last `@` whose following host (up to `/`, `?`, `#` or the end) looks
/// like one, provided the user name before the first `:` holds no `/`,
/// `?` or `#`.
fn userinfo_end(rest: &str) -> Option<usize> {
    let user_end = rest.find([':', '@']).unwrap_or(rest.len());
    if rest[..user_end].contains(['/', '?', '#']) {
        return None;
    }
    let host_like = |host: &str| {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._:[],%".contains(c))
    };
    rest.match_indices('@').map(|(at, _)| at).rev().find(|&at| {
        let after = &rest[at + 1..];
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        host_like(&after[..end])
    })
}

/// `tail` (path, query, fragment) with secret query values masked.
fn redact_query(tail: &str) -> String {
    let Some(question) = tail.find('?') else {
        return tail.to_owned();
    };
    let (path, query) = tail.split_at(question + 1);
    let fragment_start = query.find('#').unwrap_or(query.len());
    let (query, fragment) = query.split_at(fragment_start);
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if is_secret_key(key) => format!("{key}={MASK}"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}{}{fragment}", pairs.join("&"))
}

/// A `key=value` connection string with its secret values masked: values
/// are quoted (`'…'` or `"…"`), or run to white space or `;`.
fn redact_key_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(equals) = rest.find('=') {
        let before = rest[..equals].trim_end();
        let key_start = before
            .rfind(|c: char| c.is_whitespace() || c == ';' || c == '&')
            .map_or(0, |i| i + 1);
        let key = &before[key_start..];
        let value = &rest[equals + 1..];
        let value_end = value_end(value);
        out.push_str(&rest[..=equals]);
        if is_secret_key(key) && !key.is_empty() {
            out.push_str(&value[..value.len() - value.trim_start().len()]);
            out.push_str(MASK);
        } else {
            out.push_str(&value[..value_end]);
        }
        rest = &value[value_end..];
    }
    out.push_str(rest);
    out
}

/// Where a connection-string value starting `value` ends.
fn value_end(value: &str) -> usize {
    let value_start = value.len() - value.trim_start().len();
    let trimmed = &value[value_start..];
    match trimmed.chars().next() {
        Some(quote @ ('\'' | '"')) => {
            let mut escaped = false;
            for (i, c) in trimmed.char_indices().skip(1) {
                match c {
                    '\\' if !escaped => escaped = true,
                    c if c == quote && !escaped => return value_start + i + 1,
                    _ => escaped = false,
                }
            }
            value.len()
        }
        _ => trimmed
            .find(|c: char| c.is_whitespace() || c == ';')
            .map_or(value.len(), |i| value_start + i),
    }
}

/// `message` (a driver's error about `url`, say) with every secret of `url`
/// replaced by `***`: its password and secret query values, as written and
/// percent-decoded, and `url` itself by its [`redact_url`] form. For
/// messages that may quote the URL or its parts.
pub fn redact_secrets(message: &str, url: &str) -> String {
    let mut out = message.replace(url, &redact_url(url));
    for secret in secrets(url) {
        if !secret.is_empty() {
            out = out.replace(&secret, MASK);
        }
    }
    out
}

/// The secrets `redact_url` hides in `url`, as written and decoded, longest
/// first.
fn secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        if let Some(at) = userinfo_end(rest)
            && let Some((_, password)) = rest[..at].split_once(':')
        {
            found.push(password.to_owned());
        }
        let query = rest.split_once('?').map_or("", |(_, q)| q);
        let query = query.split('#').next().unwrap_or_default();
        for pair in query.split('&') {
            if let Some((key, value)) = pair.split_once('=')
                && is_secret_key(key)
            {
                found.push(value.to_owned());
            }
        }
    }
    let decoded: Vec<String> = found
        .iter()
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    found.extend(decoded);
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found.dedup();
    found
}

/// `url` with its path replaced by `/database`, keeping its query string:
/// the same server, another database (`mysql://root@h:3306/old?x=1` with
/// `new` is `mysql://root@h:3306/new?x=1`).
pub fn with_database(url: &str, database: &str) -> String {
    let authority_start = url.find("://").map_or(0, |i| i + 3);
    let (base, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let host_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    format!("{}/{database}{query}", &base[..host_end])
}

#[cfg(test)]
mod tests {
    use super::{redact_secrets, redact_url};

    #[test]
    fn passwords_are_hidden_and_everything_else_kept() {
        assert_eq!(
            redact_url("postgres://app:s3cr@t@db:5432/app?sslmode=require"),
            "postgres://app:***@db:5432/app?sslmode=require"
        );
        assert_eq!(
            redact_url("mysql://root@127.0.0.1:3306/"),
            "mysql://root@127.0.0.1:3306/"
        );
        assert_eq!(redact_url("postgres://db/app"), "postgres://db/app");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn a_password_with_any_unencoded_character_is_hidden() {
        for password in [
            "p/ss",
            "p?ss",
            "p#ss",
            "p@ss",
            "p:ss",
            "a/b?c#d@e:f",
            "p@ss/w@rd",
        ] {
            let url = format!("postgres://app:{password}@db.example:5432/app?sslmode=require");
            assert_eq!(
                redact_url(&url),
                "postgres://app:***@db.example:5432/app?sslmode=require",
                "{password}"
            );
        }
        assert_eq!(
            redact_url("redis://:p/w#x@10.0.0.1:6379/0"),
            "redis://:***@10.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("mysql://root:s3cr%2Ft@[::1]:3306/"),
            "mysql://root:***@[::1]:3306/"
        );
        // No password: nothing hidden, an `@` in the path kept.
        assert_eq!(
            redact_url("postgres://app@db/app?application_name=me"),
            "postgres://app@db/app?application_name=me"
        );
        assert_eq!(redact_url("sqlite://jobs@2.db"), "sqlite://jobs@2.db");
    }

    #[test]
    fn secret_query_parameters_are_hidden_in_any_case() {
        assert_eq!(
            redact_url(
                "postgres://db/app?user=app&password=hunter2&sslmode=require&PWD=a&Pass=b\
                 &secret=c&token=d&sslpassword=e&api_token=f#frag"
            ),
            "postgres://db/app?user=app&password=***&sslmode=require&PWD=***&Pass=***\
             &secret=***&token=***&sslpassword=***&api_token=***#frag"
        );
        assert_eq!(
            redact_url("mysql://u:pw@h/db?Password=x%26y"),
            "mysql://u:***@h/db?Password=***"
        );
    }

    #[test]
    fn key_value_connection_strings_hide_their_secrets() {
        assert_eq!(
            redact_url("host=db user=app password=hunter2 dbname=jobs"),
            "host=db user=app password=*** dbname=jobs"
        );
        assert_eq!(
            redact_url("host=db password = 'two words \\' here' sslmode=require"),
            "host=db password = *** sslmode=require"
        );
        assert_eq!(
            redact_url("Server=db;Uid=app;Pwd=hunter2;Database=jobs"),
            "Server=db;Uid=app;Pwd=***;Database=jobs"
        );
    }

    #[test]
    fn a_message_quoting_the_url_or_its_password_is_redacted() {
        let url = "mysql://app:p%40ss/x@db/jobs?token=t0k3n";
        let message = format!("bad URL {url}: password p@ss/x rejected, token t0k3n");
        let redacted = redact_secrets(&message, url);
        for secret in ["p%40ss/x", "p@ss/x", "t0k3n"] {
            assert!(!redacted.contains(secret), "{redacted}");
        }
        assert!(
            redacted.contains("mysql://app:***@db/jobs?token=***"),
            "{redacted}"
        );
    }

    #[test]
    fn with_database_replaces_or_adds_the_path() {
        use super::with_database;
        assert_eq!(
            with_database("mysql://root@h:3306", "d"),
            "mysql://root@h:3306/d"
        );
        assert_eq!(
            with_database("mysql://root@h:3306/", "d"),
            "mysql://root@h:3306/d"
        );
        assert_eq!(
            with_database("mysql://root@h/old?x=1", "d"),
            "mysql://root@h/d?x=1"
        );
        assert_eq!(with_database("mysql://h", "b"), "mysql://h/b");
    }
}
