//! Errors from `queue::connect` name the URL without any of its secrets:
//! a password with unencoded `/`, `?`, `#`, `@` or `:`, or a `password=`
//! parameter (no server needed: the schemes are unknown, or the ports
//! closed).

use queue::Storage as _;

const SECRETS: [&str; 3] = ["p/ss?w#rd", "hunter2", "t0k3n"];

fn assert_hidden(message: &str) {
    for secret in SECRETS {
        assert!(!message.contains(secret), "{secret} in: {message}");
    }
    assert!(message.contains("***"), "{message}");
}

#[tokio::test]
async fn an_unknown_scheme_names_the_url_without_its_secrets() {
    let url = "mongodb://app:p/ss?w#rd@db.example:27017/jobs?password=hunter2&token=t0k3n";
    let error = queue::connect(url).await.expect_err("no such backend");
    assert_eq!(error.invalid_field(), Some("url"), "{error:?}");
    assert_hidden(&error.to_string());
    assert_hidden(&format!("{error:?}"));
}

#[tokio::test]
async fn an_unreachable_server_names_the_url_without_its_secrets() {
    for url in [
        "postgres://app:p/ss?w#rd@127.0.0.1:9/jobs?password=hunter2&token=t0k3n&connect_timeout=2",
        "redis://app:p/ss?w#rd@127.0.0.1:9/0?password=hunter2&token=t0k3n",
        "mysql://app:p/ss?w#rd@127.0.0.1:9/jobs?password=hunter2&token=t0k3n",
    ] {
        let message = match queue::connect(url).await {
            Err(error) => format!("{error} {error:?}"),
            // MySQL connects lazily: its first use fails.
            Ok(storage) => {
                let error = storage.stats().await.expect_err("nothing listens on 9");
                format!("{error} {error:?}")
            }
        };
        assert!(!message.contains("p/ss"), "{url}: {message}");
        for secret in SECRETS {
            assert!(!message.contains(secret), "{url}: {secret} in {message}");
        }
    }
}
