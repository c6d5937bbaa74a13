//! Reads the `error_pages` files of a config into memory, at start-up, on reload and in
//! `squall check`: a file that cannot be read, or is over [`ERROR_PAGE_BYTES_MAX`], is a
//! diagnostic at the key that named it, and the config is refused as a whole.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use squall_config::{Config, Diagnostic, ERROR_PAGE_BYTES_MAX, Site, Sites};

/// The bytes of every page file `config` names, by path.
pub fn load(config: &Config, sites: &Sites) -> Result<HashMap<PathBuf, Bytes>, Vec<Diagnostic>> {
    let server = (config.server.error_pages.iter()).map(|p| (None, p));
    let vhosts = (config.vhost.iter().enumerate())
        .flat_map(|(i, v)| v.error_pages.iter().map(move |p| (Some(i), p)));
    let mut files = HashMap::new();
    let mut problems = Vec::new();
    for (vhost, page) in server.chain(vhosts) {
        if files.contains_key(&page.path) {
            continue;
        }
        match read(&page.path) {
            Ok(body) => {
                files.insert(page.path.clone(), body);
            }
            Err(message) => {
                let site = Site::ErrorPage(vhost, page.status.as_u16());
                problems.push(sites.diagnostic(site, message));
            }
        }
    }
    if problems.is_empty() {
        Ok(files)
    } else {
        Err(problems)
    }
}

/// The whole file, if it is a readable file of at most [`ERROR_PAGE_BYTES_MAX`] bytes.
fn read(path: &Path) -> Result<Bytes, String> {
    let shown = path.display();
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read error page {shown}: {e}"))?;
    let mut body = Vec::new();
    (file.take(ERROR_PAGE_BYTES_MAX + 1).read_to_end(&mut body))
        .map_err(|e| format!("cannot read error page {shown}: {e}"))?;
    if body.len() as u64 > ERROR_PAGE_BYTES_MAX {
        return Err(format!(
            "error page {shown} is over {ERROR_PAGE_BYTES_MAX} bytes"
        ));
    }
    Ok(Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_read_and_a_missing_or_large_one_is_refused_at_its_key() {
        let dir = std::env::temp_dir().join(format!("squall-pages-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("404.html"), "<p>gone</p>").unwrap();
        let big = vec![b'x'; ERROR_PAGE_BYTES_MAX as usize + 1];
        std::fs::write(dir.join("big.txt"), big).unwrap();
        let text = "[[listen]]\naddress = \"127.0.0.1:8080\"\n[server]\n\
                    error_pages = { 404 = \"404.html\" }\n\n[[vhost]]\n\
                    error_pages = { 502 = \"none.html\", 503 = \"big.txt\" }\n";
        let (mut config, sites) = squall_config::parse_with_sites(text, "s.toml").unwrap();
        config.resolve_paths(&dir);
        let problems = load(&config, &sites).unwrap_err();
        let shown: Vec<_> = problems.iter().map(|d| (d.line, d.col)).collect();
        assert_eq!(shown, [(7, 23), (7, 42)], "{problems:?}");
        assert!(problems[1].message.contains("over"), "{problems:?}");
        let text = "[[listen]]\naddress = \"127.0.0.1:8080\"\n\
                    [server]\nerror_pages = { 404 = \"404.html\" }\n";
        let (mut config, sites) = squall_config::parse_with_sites(text, "s.toml").unwrap();
        config.resolve_paths(&dir);
        let files = load(&config, &sites).unwrap();
        assert_eq!(
            files[&dir.join("404.html")],
            Bytes::from_static(b"<p>gone</p>")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
