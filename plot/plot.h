// The plotting module: PNG charts for the experiments, drawn by our own rasterizer (plot/canvas.h) with
// stb_easy_font text and stb_image_write output. Read plot/chart.h first.
#pragma once

#include "plot/axis.h"
#include "plot/canvas.h"
#include "plot/chart.h"
