"""Why a pod did not get a device model: per-device primary reasons, tier blockers, one sentence.

``explain`` answers against a cluster view (an offline dump or the world rebuilt at a
decision's ``seq``) with exact per-device verdicts from the allocator; ``explain_record``
answers from a stored decision's evidence summary alone. Both return an ``Explanation``.
``would_get_now`` says what a pod holding no allocation would get if scheduled now. A pending
device-plugin pod, whose GPUs have no identities, is answered by the decision the engine would
take for it now (``audit.explain.deviceplugin``); it chooses no model, so a model its decision
does not name is answered from that model's GPUs on the device-plugin nodes of a world, or, from
the record alone, by saying that the record does not say, with no figure of another model.
Pure: no I/O, no clock.
"""

from audit.explain.core import explain, known_models, would_get_now
from audit.explain.models import ModelTable, UnknownModel, check_model
from audit.explain.record import explain_record
from audit.explain.result import Explanation
from audit.explain.view import ClusterView, ViewError

__all__ = ["ClusterView", "Explanation", "ModelTable", "UnknownModel", "ViewError", "check_model", "explain",
           "explain_record", "known_models", "would_get_now"]
