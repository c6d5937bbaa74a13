//! A route's static files: `root`, `index`, `root_follow_symlinks` and `precompressed`.
//! Whether `root` exists and is a directory is the binary's question (it opens the directory
//! at start-up, on reload and in `squall check`); here the values are checked for what they
//! are.

use toml::Spanned;

use crate::diagnostics::Report;
use crate::model::{Action, Files, INDEX_DEFAULT, PRECOMPRESSED_CODINGS};
use crate::raw::{List, OneOrMany, RawRoute, Str};

/// The `Files` action of a route with `root`.
pub(super) fn files(root: &Str, raw: &RawRoute, r: &mut Report) -> Option<Action> {
    if root.get_ref().is_empty() {
        r.error(&root.span(), "root is empty: name the directory to serve");
        return None;
    }
    let index = match &raw.index {
        None => vec![INDEX_DEFAULT.to_owned()],
        Some(index) => index_names(index, r)?,
    };
    let follow_symlinks = raw
        .root_follow_symlinks
        .as_ref()
        .is_some_and(|f| *f.get_ref());
    let precompressed = match &raw.precompressed {
        None => Vec::new(),
        Some(list) => precompressed(list, r)?,
    };
    Some(Action::Files(Files {
        root: root.get_ref().into(),
        index,
        follow_symlinks,
        precompressed,
    }))
}

/// `precompressed`: coding tokens Squall knows (lowercased), each once, at least one.
fn precompressed(list: &List<String>, r: &mut Report) -> Option<Vec<String>> {
    if list.get_ref().is_empty() {
        r.error(&list.span(), "precompressed is empty: leave it out");
        return None;
    }
    let mut codings: Vec<String> = Vec::new();
    for item in list.get_ref() {
        let token = item.get_ref().trim().to_ascii_lowercase();
        if !PRECOMPRESSED_CODINGS.contains(&token.as_str()) {
            let message = format!(
                "unknown coding {token:?} in precompressed: use \"br\", \"zstd\" or \"gzip\""
            );
            r.error(&item.span(), message);
            return None;
        }
        if codings.contains(&token) {
            r.error(&item.span(), format!("precompressed names {token:?} twice"));
            return None;
        }
        codings.push(token);
    }
    Some(codings)
}

/// `index`, `root_follow_symlinks` and `precompressed` on a route without `root` are mistakes.
pub(super) fn orphans(raw: &RawRoute, r: &mut Report) {
    if raw.root.is_some() {
        return;
    }
    if let Some(index) = &raw.index {
        r.error(&index.span(), "index needs root");
    }
    if let Some(follow) = &raw.root_follow_symlinks {
        r.error(&follow.span(), "root_follow_symlinks needs root");
    }
    if let Some(list) = &raw.precompressed {
        r.error(&list.span(), "precompressed needs root");
    }
}

/// The index file names: plain names, no path.
fn index_names(index: &Spanned<OneOrMany>, r: &mut Report) -> Option<Vec<String>> {
    let names = match index.get_ref() {
        OneOrMany::One(name) => vec![name.clone()],
        OneOrMany::Many(names) => names.clone(),
    };
    if names.is_empty() {
        r.error(&index.span(), "index is empty: leave it out for index.html");
        return None;
    }
    for name in &names {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            r.error(
                &index.span(),
                format!("index {name:?} is not a file name (no '/', not '.' or '..')"),
            );
            return None;
        }
    }
    Some(names)
}
