"""Where a loaded tensor goes: load's map_location (a device or its name, a {saved: wanted} dict of location
names, or a function of (storage, location) as torch calls it; here the loaded tensor stands for the storage) and
default_restore_location, which such functions call."""

from ._tensor import Tensor, device


def default_restore_location(storage, location):
    """`storage` (a loaded tensor here) on the device `location` names ('cpu', 'cuda:0')."""
    target = device(location)
    return storage if storage.device == target else storage.to(target)


def relocated(tensor, location, map_location):
    """`tensor`, saved on `location`, where map_location puts it (the default device for None)."""
    if map_location is None:
        return tensor
    if callable(map_location) and not isinstance(map_location, device):
        moved = map_location(tensor, location)
        if moved is None:
            return default_restore_location(tensor, location)
        if not isinstance(moved, Tensor):
            raise TypeError(f"map_location should return a storage (a Tensor here) or None, but got {type(moved)}")
        return moved
    if isinstance(map_location, dict):
        return default_restore_location(tensor, map_location.get(location, location))
    if isinstance(map_location, (str, device)):
        return default_restore_location(tensor, map_location)
    raise ValueError(
        "map_location should be either None, a string, a torch.device, a dict, or a function, "
        f"but got {type(map_location).__name__}"
    )
