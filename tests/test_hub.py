"""torch.hub's download helpers, compared with torch's: the cache directory from the environment or set_dir,
download_url_to_file with its hash check, load_state_dict_from_url's cached download, and the progress bar class.
URLs are file:// URLs, so nothing leaves the machine."""

import hashlib
import os

import pytest
import torch.hub as torch_hub

import batched_grad as bg


@pytest.fixture
def hub_dirs():
    """Both libraries' hub directories reset to the environment's after the test."""
    yield
    torch_hub._hub_dir = None
    bg.hub._hub_dir = None


def test_hub_dir_follows_torch_home_and_set_dir(tmp_path, monkeypatch, hub_dirs):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    assert bg.hub.get_dir() == torch_hub.get_dir() == str(tmp_path / "home" / "hub")
    monkeypatch.delenv("TORCH_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert bg.hub.get_dir() == torch_hub.get_dir()
    bg.hub.set_dir(str(tmp_path / "mine"))
    torch_hub.set_dir(str(tmp_path / "mine"))
    assert bg.hub.get_dir() == torch_hub.get_dir() == str(tmp_path / "mine")


def test_progress_bar_is_torchs(capsys):
    assert bg.hub.tqdm is torch_hub.tqdm
    with bg.hub.tqdm(total=3, disable=True) as bar:
        bar.update(3)


def test_download_checks_the_hash_prefix_as_torch(tmp_path):
    source = tmp_path / "weights.bin"
    source.write_bytes(b"0123456789" * 1000)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    bg.hub.download_url_to_file(source.as_uri(), str(tmp_path / "copy.bin"), hash_prefix=digest[:8], progress=False)
    assert (tmp_path / "copy.bin").read_bytes() == source.read_bytes()
    errors = []
    for hub, name in ((torch_hub, "theirs.bin"), (bg.hub, "ours.bin")):
        with pytest.raises(RuntimeError) as caught:
            hub.download_url_to_file(source.as_uri(), str(tmp_path / name), hash_prefix="ffff", progress=False)
        errors.append(str(caught.value))
        assert not (tmp_path / name).exists()
    assert errors[0] == errors[1]
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".partial")]


def test_state_dict_from_url_downloads_once_into_the_model_dir(tmp_path):
    bg.manual_seed(0)
    layer = bg.nn.Linear(3, 2)
    source = tmp_path / "served" / "linear.pt"
    source.parent.mkdir()
    bg.save(layer.state_dict(), str(source))
    model_dir = tmp_path / "checkpoints"
    state = bg.hub.load_state_dict_from_url(source.as_uri(), model_dir=str(model_dir), progress=False)
    assert sorted(state) == ["bias", "weight"]
    assert bg.equal(state["weight"], layer.weight.detach())
    assert os.listdir(model_dir) == ["linear.pt"]
    source.unlink()  # the cached copy is read from now on
    again = bg.hub.load_state_dict_from_url(source.as_uri(), model_dir=str(model_dir), progress=False)
    assert bg.equal(again["bias"], layer.bias.detach())


def test_state_dict_from_url_checks_the_hash_in_the_file_name(tmp_path):
    source = tmp_path / "net-deadbeef.pt"
    bg.save({"w": bg.ones(2)}, str(source))
    with pytest.raises(RuntimeError, match='invalid hash value \\(expected "deadbeef"'):
        bg.hub.load_state_dict_from_url(source.as_uri(), model_dir=str(tmp_path / "c"), check_hash=True, progress=False)
