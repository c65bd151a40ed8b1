"""Type stubs: the AVX2 and FMA build of :mod:`.conv` (the same functions)."""

from .conv import CHANNEL_VECTOR_BLOCK as CHANNEL_VECTOR_BLOCK
from .conv import CHANNEL_VECTOR_NATIVE as CHANNEL_VECTOR_NATIVE
from .conv import DIRECT_BLOCK as DIRECT_BLOCK
from .conv import DIRECT_VECTOR as DIRECT_VECTOR
from .conv import bias_add_clamp as bias_add_clamp
from .conv import bias_clamp as bias_clamp
from .conv import channel_vector_conv2d as channel_vector_conv2d
from .conv import channel_vector_conv2d_scratch as channel_vector_conv2d_scratch
from .conv import channel_vector_items as channel_vector_items
from .conv import col2im as col2im
from .conv import depthwise2d as depthwise2d
from .conv import direct_conv2d as direct_conv2d
from .conv import direct_conv2d_scratch as direct_conv2d_scratch
from .conv import im2col as im2col
