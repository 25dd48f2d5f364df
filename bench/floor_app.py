"""The floor of the static site's cold load: an empty Panel page with one Bokeh figure and one
widget, built by scripts/build_site.py (`floor`) with kvweb's packages and page scripts, which
mark it interactive as they mark kvweb. bench/site_load.py --floor divides kvweb's cold load by
this page's: what kvweb's own start-up adds, whatever the host's speed that day."""

import numpy as np
import panel as pn
from bokeh.plotting import figure

x = np.arange(32)
plot = figure(height=300, sizing_mode="stretch_width")
line = plot.line(x, x**2)
power = pn.widgets.IntSlider(name="power", start=1, end=4, value=2)
power.param.watch(lambda event: line.data_source.data.update(y=x**event.new), "value")
pn.Column(power, pn.pane.Bokeh(plot)).servable(title="floor")
