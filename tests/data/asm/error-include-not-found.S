#include "inc/missing.inc"
