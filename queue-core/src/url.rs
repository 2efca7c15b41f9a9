//! Database URLs in messages: shown, but never with their password.

/// `url` with its password replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

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
}
