"""Pretrained checkpoints by name, found in the local caches: nothing is downloaded.

`resolve` reads a local path that exists first; a name that is none is looked up
here:

  HuggingFace names  `ORG/NAME` or `NAME`, optionally `@revision` (a branch, a
      tag or a commit), in the cache `huggingface_hub` writes (`hf download`):
      `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
      There `models--ORG--NAME/refs/main` holds a commit and
      `models--ORG--NAME/snapshots/<commit>/` its files (links into blobs/).
  original releases  google-research/bert's zips by name (`uncased_L-12_H-768_A-12`,
      `multi_cased_L-12_H-768_A-12`, the 24 small BERTs `uncased_L-4_H-256_A-4`, ...)
      or HuggingFace's name for the same weights (`bert-base-uncased`): in the
      keras_bert cache, `$KERAS_BERT_CACHE` else `~/.cache/keras_bert`, as
      `<release>/` holding the unzipped files, and in the HuggingFace cache
      under HuggingFace's names. The form given is looked for first.

A name found nowhere is a FileNotFoundError that lists every folder looked in
and the one command that fetches it.
"""

from __future__ import annotations

import os
import re

_STORAGE = "https://storage.googleapis.com/bert_models"

# Release name -> (its folder on storage.googleapis.com/bert_models, HuggingFace's
# names for the same weights), as google-research/bert's README links them.
RELEASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "uncased_L-12_H-768_A-12": (
        "2018_10_18",
        ("google-bert/bert-base-uncased", "bert-base-uncased"),
    ),
    "cased_L-12_H-768_A-12": ("2018_10_18", ("google-bert/bert-base-cased", "bert-base-cased")),
    "uncased_L-24_H-1024_A-16": (
        "2018_10_18",
        ("google-bert/bert-large-uncased", "bert-large-uncased"),
    ),
    "cased_L-24_H-1024_A-16": ("2018_10_18", ("google-bert/bert-large-cased", "bert-large-cased")),
    "multi_cased_L-12_H-768_A-12": (
        "2018_11_23",
        ("google-bert/bert-base-multilingual-cased", "bert-base-multilingual-cased"),
    ),
    "multilingual_L-12_H-768_A-12": (
        "2018_11_03",
        ("google-bert/bert-base-multilingual-uncased", "bert-base-multilingual-uncased"),
    ),
    "chinese_L-12_H-768_A-12": (
        "2018_11_03",
        ("google-bert/bert-base-chinese", "bert-base-chinese"),
    ),
    "wwm_uncased_L-24_H-1024_A-16": (
        "2019_05_30",
        (
            "google-bert/bert-large-uncased-whole-word-masking",
            "bert-large-uncased-whole-word-masking",
        ),
    ),
    "wwm_cased_L-24_H-1024_A-16": (
        "2019_05_30",
        ("google-bert/bert-large-cased-whole-word-masking", "bert-large-cased-whole-word-masking"),
    ),
}
# The 24 small BERTs (Turc et al., 2019): 64-wide heads. Their L-12_H-768 is
# BERT-base, whose name stays with the 2018 release above.
for _layers in (2, 4, 6, 8, 10, 12):
    for _hidden in (128, 256, 512, 768):
        _name = f"uncased_L-{_layers}_H-{_hidden}_A-{_hidden // 64}"
        RELEASES.setdefault(_name, ("2020_02_20", (f"google/bert_{_name}",)))
del _layers, _hidden, _name
ALIASES = {
    hub_name: release for release, (_, hub_names) in RELEASES.items() for hub_name in hub_names
}

# huggingface_hub's repo ids: `NAME` or `ORG/NAME` of letters, digits, `-`, `_`,
# `.`; no `--` or `..` (validate_repo_id). Then an optional `@revision`.
_NAME = re.compile(
    r"(?P<repo>[A-Za-z0-9][\w.-]*(?:/[A-Za-z0-9][\w.-]*)?)(?:@(?P<rev>[\w./-]+))?", re.ASCII
)
# A missing file, not a name: reported as a missing path.
_FILE_SUFFIXES = (".ckpt", ".keras", ".json", ".safetensors", ".index", ".h5", ".bin", ".txt")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def is_name(path: str) -> bool:
    """Whether `path`, which does not exist, reads as a checkpoint name."""
    match = _NAME.fullmatch(path)
    return (
        match is not None
        and len(match["repo"]) <= 96
        and "--" not in match["repo"]
        and ".." not in path
        and not match["repo"].endswith(_FILE_SUFFIXES)
    )


def huggingface_cache() -> tuple[str, str]:
    """(folder, what chose it) of the HuggingFace hub cache, as huggingface_hub picks it."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return os.path.expanduser(os.environ[variable]), f"${variable}"
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub"), "$HF_HOME/hub"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(base), "huggingface", "hub"), "the default"


def keras_bert_cache() -> tuple[str, str]:
    """(folder, what chose it) of the keras_bert cache of original releases."""
    if os.environ.get("KERAS_BERT_CACHE"):
        return os.path.expanduser(os.environ["KERAS_BERT_CACHE"]), "$KERAS_BERT_CACHE"
    return os.path.expanduser(os.path.join("~", ".cache", "keras_bert")), "the default"


def find_cached(name: str) -> str:
    """The local folder of the checkpoint called `name` (see the module docstring)."""
    match = _NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r} is not a checkpoint name")
    repo, revision = match["repo"], match["rev"]
    release = repo if repo in RELEASES else ALIASES.get(repo)
    hub, hub_chosen_by = huggingface_cache()
    cache, cache_chosen_by = keras_bert_cache()

    hub_names = [repo] if release is None or repo != release else []
    if release is not None:
        hub_names += [other for other in RELEASES[release][1] if other != repo]
    places = [("hub", hub_name) for hub_name in hub_names]
    if release is not None:
        # The form given first: a release name means its original files.
        places.insert(0 if repo == release else len(places), ("release", release))

    looked = []
    for kind, place in places:
        if kind == "hub":
            folder, where = _hub_snapshot(hub, place, revision)
            looked.append(f"{where}  (HuggingFace cache, {hub_chosen_by})")
        else:
            folder, where = _release_folder(cache, place)
            looked.append(f"{where}  (keras_bert cache, {cache_chosen_by})")
        if folder is not None:
            return folder

    if release is not None and repo == release:
        zip_name = f"{release}.zip"
        command = (
            f"curl -LO {_STORAGE}/{RELEASES[release][0]}/{zip_name} && "
            f"unzip {zip_name} -d {os.path.join(cache, release)}"
        )
    else:
        arguments = f"download {repo}" + (f" --revision {revision}" if revision else "")
        command = f"hf {arguments}  (older huggingface_hub: huggingface-cli {arguments})"
    raise FileNotFoundError(
        f"{name}: no such local path, and not in the local caches (keras_bert reads no "
        "network). Looked in:\n  " + "\n  ".join(looked) + f"\nFetch it with: {command}"
    )


def _hub_snapshot(hub: str, repo: str, revision: str | None) -> tuple[str | None, str]:
    """(the snapshot folder or None, the place looked at) of `repo` in the hub cache."""
    model = os.path.join(hub, "models--" + repo.replace("/", "--"))
    snapshots = os.path.join(model, "snapshots")
    if revision is not None and _COMMIT.fullmatch(revision):
        commit = revision
    else:
        ref = os.path.join(model, "refs", revision or "main")
        if os.path.isfile(ref):
            with open(ref, encoding="utf-8") as f:
                commit = f.read().strip()
        elif revision is None and os.path.isdir(snapshots):
            # Caches copied by hand (or pruned) can lack refs/: one snapshot is unambiguous.
            commits = sorted(os.listdir(snapshots))
            if len(commits) > 1:
                raise FileNotFoundError(
                    f"{model}: no refs/main and {len(commits)} snapshots "
                    f"({', '.join(commits[:4])}{', ...' if len(commits) > 4 else ''}); "
                    f"name one: {repo}@<commit>"
                )
            if not commits:
                return None, snapshots
            commit = commits[0]
        else:
            return None, ref
    folder = os.path.join(snapshots, commit)
    return (folder if os.path.isdir(folder) else None), folder


def _release_folder(cache: str, release: str) -> tuple[str | None, str]:
    """(the unzipped release or None, the place looked at) in the keras_bert cache."""
    folder = os.path.join(cache, release)
    # The 2018-2019 zips hold a folder of their name, the 2020 ones the files
    # themselves: `unzip NAME.zip -d CACHE/NAME` gives either layout.
    for candidate in (folder, os.path.join(folder, release)):
        if os.path.isfile(os.path.join(candidate, "bert_config.json")):
            return candidate, folder
    return None, folder
