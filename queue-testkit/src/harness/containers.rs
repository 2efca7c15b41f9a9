//! Databases started with testcontainers when no URL is given: one
//! container per server kind per test binary, shared by its tests.
//! Containers carry the label `queue-testkit=1`. Images, storage and
//! clean-up: docs/writing-a-backend.md, "4. A real database in tests".

use std::sync::OnceLock;
use std::time::Duration;

use testcontainers::core::{IntoContainerPort, Mount, WaitFor};
use testcontainers::runners::SyncRunner;
use testcontainers::{Container, GenericImage, ImageExt};

/// The image variable for PostgreSQL.
pub const POSTGRES_IMAGE_VAR: &str = "QUEUE_TEST_POSTGRES_IMAGE";
/// The image variable for MySQL / MariaDB.
pub const MYSQL_IMAGE_VAR: &str = "QUEUE_TEST_MYSQL_IMAGE";

/// What a server kind needs to be started and reached.
struct Server {
    image_var: &'static str,
    default_image: &'static str,
    port: u16,
    ready_line: &'static str,
    /// Kept on a tmpfs: the tests need no disk, and a machine short of
    /// disk space cannot fail the server's start-up.
    data_dir: &'static str,
    env: &'static [(&'static str, &'static str)],
    url: fn(host: &str, port: u16) -> String,
}

const POSTGRES: Server = Server {
    image_var: POSTGRES_IMAGE_VAR,
    default_image: "postgres:15",
    port: 5432,
    ready_line: "database system is ready to accept connections",
    data_dir: "/var/lib/postgresql/data",
    env: &[("POSTGRES_HOST_AUTH_METHOD", "trust")],
    url: |host, port| format!("postgres://postgres@{host}:{port}/postgres"),
};

const MYSQL: Server = Server {
    image_var: MYSQL_IMAGE_VAR,
    default_image: "mysql:8",
    port: 3306,
    ready_line: "ready for connections",
    data_dir: "/var/lib/mysql",
    env: &[("MYSQL_ALLOW_EMPTY_PASSWORD", "yes")],
    // prefer_socket=false: for a local host mysql_async otherwise switches
    // to the server's unix socket path, which on a machine that runs its
    // own MySQL is the wrong server.
    url: |host, port| format!("mysql://root@{host}:{port}/?prefer_socket=false"),
};

type Started = Result<(Container<GenericImage>, String), String>;

static POSTGRES_CONTAINER: OnceLock<Started> = OnceLock::new();
static MYSQL_CONTAINER: OnceLock<Started> = OnceLock::new();

/// The URL of this binary's PostgreSQL container, starting it on first use.
pub fn postgres_url() -> Result<String, String> {
    url_of(&POSTGRES_CONTAINER, &POSTGRES)
}

/// The URL of this binary's MySQL container, starting it on first use.
pub fn mysql_url() -> Result<String, String> {
    url_of(&MYSQL_CONTAINER, &MYSQL)
}

fn url_of(cell: &'static OnceLock<Started>, server: &'static Server) -> Result<String, String> {
    // The sync runner blocks on a runtime of its own, which may not run
    // inside the calling test's runtime: start it from a plain thread.
    let started = cell.get_or_init(|| {
        std::thread::spawn(|| start(server))
            .join()
            .unwrap_or_else(|_| Err("the container start-up thread panicked".into()))
    });
    started
        .as_ref()
        .map(|(_, url)| url.clone())
        .map_err(Clone::clone)
}

fn start(server: &Server) -> Started {
    let image = std::env::var(server.image_var).unwrap_or_else(|_| server.default_image.into());
    let (name, tag) = split_image(&image);
    let mut request = GenericImage::new(name, tag)
        .with_exposed_port(server.port.tcp())
        .with_wait_for(WaitFor::message_on_stderr(server.ready_line))
        .with_label("queue-testkit", "1")
        .with_mount(Mount::tmpfs_mount(server.data_dir))
        .with_startup_timeout(Duration::from_secs(180));
    for (key, value) in server.env {
        request = request.with_env_var(*key, *value);
    }
    let container = request.start().map_err(|e| {
        format!(
            "cannot start {image} (set {} to another image): {e}",
            server.image_var
        )
    })?;
    // An address, not `localhost`: no resolver or socket detour.
    let host = match container.get_host().map_err(|e| e.to_string())?.to_string() {
        name if name == "localhost" => "127.0.0.1".to_owned(),
        other => other,
    };
    let port = container
        .get_host_port_ipv4(server.port.tcp())
        .map_err(|e| e.to_string())?;
    eprintln!("started {image} for this test binary on {host}:{port}");
    let url = (server.url)(&host, port);
    Ok((container, url))
}

/// Splits `repo/name:tag` into name and tag (`latest` when none).
fn split_image(image: &str) -> (String, String) {
    let slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[slash..].rfind(':') {
        Some(colon) => (
            image[..slash + colon].to_owned(),
            image[slash + colon + 1..].to_owned(),
        ),
        None => (image.to_owned(), "latest".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::split_image;

    #[test]
    fn image_names_split_at_the_tag_colon_only() {
        let split = |s| {
            let (n, t) = split_image(s);
            (n, t)
        };
        assert_eq!(split("postgres:15"), ("postgres".into(), "15".into()));
        assert_eq!(split("mysql"), ("mysql".into(), "latest".into()));
        assert_eq!(
            split("registry:5000/queue-test/pg:15"),
            ("registry:5000/queue-test/pg".into(), "15".into())
        );
    }
}
