"""Type stubs: the AVX2 and FMA build of :mod:`.activation`'s kernel."""

from .activation import Activation as Activation
from .activation import activation_f32 as activation_f32
from .activation import attention_softmax as attention_softmax
from .activation import lrn_f32 as lrn_f32
