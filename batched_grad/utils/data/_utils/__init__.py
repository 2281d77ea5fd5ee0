"""torch.utils.data._utils: the private module paths under which training code imports default_collate,
collate_fn maps, get_worker_info and ExceptionWrapper (`from torch.utils.data._utils.collate import
default_collate`). The submodules are the same module objects as torch.utils.data.collate, .worker and .fetch, so a
collate_fn registered in default_collate_fn_map through either path is seen by both."""

import sys

from .. import collate, fetch, worker
from ..fetch import ExceptionWrapper

for _module in (collate, fetch, worker):
    sys.modules[f"{__name__}.{_module.__name__.rsplit('.', 1)[1]}"] = _module

IS_WINDOWS = sys.platform == "win32"
MP_STATUS_CHECK_INTERVAL = 5.0  # seconds between liveness checks of the process on the other end of a queue

__all__ = ["ExceptionWrapper", "IS_WINDOWS", "MP_STATUS_CHECK_INTERVAL", "collate", "fetch", "worker"]
