"""The networks of repdyn, one module per model family: the fully connected :class:`MLP` (mlp), the small
convolutional nets :class:`ConvChain` and :class:`SmallCNN` (cnn), the MnasNet-like :class:`MnasCNN` of seed 003
(mnas_cnn), the LeNet of seed 004 (lenet), the batched shallow univariate ReLU networks of seed 001 and their
initialisations (shallow_relu), the one-hidden-layer network of seed 003 (hidden_layer) and the Leaky ResNets of
seed 002 with their objective (leaky_resnet). Their training loops are the modules of :mod:`repdyn.nn` named for
each loop."""

from repdyn.nn.models.cnn import ConvChain, SmallCNN
from repdyn.nn.models.hidden_layer import HiddenLayerModule, HiddenLayerNet
from repdyn.nn.models.leaky_resnet import LeakyResNet
from repdyn.nn.models.lenet import LeNet
from repdyn.nn.models.mlp import MLP
from repdyn.nn.models.mnas_cnn import MnasCNN
from repdyn.nn.models.shallow_relu import ShallowReLUBatch

__all__ = ["MLP", "ConvChain", "HiddenLayerModule", "HiddenLayerNet", "LeNet", "LeakyResNet", "MnasCNN",
           "ShallowReLUBatch", "SmallCNN"]
