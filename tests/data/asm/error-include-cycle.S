#include "inc/cycle-a.inc"
