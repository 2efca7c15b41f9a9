//! Database URLs: shown in messages never with their password, and
//! pointed at another database.

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
