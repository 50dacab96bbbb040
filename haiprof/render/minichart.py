"""A small SVG chart renderer for report.html, in place of plotly.js (4.8 MB of it, 97% of a report's weight).

It draws the subset of plotly's figure format the report's panels use (charts.py keeps building plotly-style
dicts, so a notebook can still hand them to plotly): bar traces (vertical or `orientation: "h"`, `barmode`
stack or group, per-bar colours and text), scatter traces (lines and/or markers), `layout.{x,y}axis.range` (bars
above it are clipped and marked), rect `shapes` on the x axis, `annotations` (yref "paper") and a legend below
the plot that never covers an axis title. Ticks are "nice" (1/2/5 x 10^n) and never below a range that starts at
0. Values show on hover through SVG <title> elements. No network, no eval, run-supplied text set as textContent.
"""

JS = r"""
(function(){
var NS='http://www.w3.org/2000/svg';
function mk(tag,attrs,parent,text){var e=document.createElementNS(NS,tag);for(var k in attrs)e.setAttribute(k,attrs[k]);
 if(text!==undefined)e.textContent=text;if(parent)parent.appendChild(e);return e;}
function title(t){return t===undefined||t===null?'':(typeof t==='string'?t:(t.text||''));}
function unesc(s){var d=document.createElement('textarea');d.innerHTML=String(s);return d.value;}
function niceStep(span,n){var raw=span/Math.max(1,n),p=Math.pow(10,Math.floor(Math.log10(raw))),m=raw/p;
 return (m<=1?1:m<=2?2:m<=5?5:10)*p;}
function fmt(v,step){if(v===0)return '0';var a=Math.abs(v);
 if(a>=1e6&&step>=1e5)return +(v/1e6).toFixed(step>=1e6?0:1)+'M';
 if(a>=1e4&&step>=1e3)return +(v/1e3).toFixed(step>=1e3?0:1)+'k';
 var d=step>=1?0:Math.min(6,Math.ceil(-Math.log10(step)));return (+v.toFixed(d)).toString();}
function ticks(lo,hi,n){if(!(hi>lo))hi=lo+1;var s=niceStep(hi-lo,n),out=[];
 for(var v=Math.ceil(lo/s-1e-9)*s;v<=hi+s*1e-9;v+=s)out.push(+v.toPrecision(12));return {t:out,s:s};}
function isNum(v){return typeof v==='number'&&isFinite(v);}
function draw(el,fig){
 var data=fig.data||[],L=fig.layout||{},W=Math.max(320,el.clientWidth||800),H=L.height||320;
 var xa=L.xaxis||{},ya=L.yaxis||{},bars=data.filter(function(t){return t.type==='bar';});
 var horiz=bars.length>0&&bars.every(function(t){return t.orientation==='h';});
 var mg={l:(L.margin&&L.margin.l)||64,r:20,t:title(L.title)?34:12,b:(xa.tickangle?90:46)};
 if(horiz)mg.l=Math.max(mg.l,110);
 el.innerHTML='';
 var svg=mk('svg',{'class':'main-svg',width:W,height:H,viewBox:'0 0 '+W+' '+H,role:'img'},el);
 mk('text',{x:W/2,y:18,'text-anchor':'middle','class':'mc-title'},svg,unesc(title(L.title)));
 var pw=W-mg.l-mg.r,ph=H-mg.t-mg.b;
 // category axis: bars; value axis: numbers
 var cats=[],idx={};
 function addCat(c){var k=String(c);if(!(k in idx)){idx[k]=cats.length;cats.push(c);}}
 var catKey=horiz?'y':'x',valKey=horiz?'x':'y';
 bars.forEach(function(t){(t[catKey]||[]).forEach(addCat);});
 var lines=data.filter(function(t){return t.type==='scatter';});
 var numericX=lines.length>0&&bars.length===0;
 // value range
 var stacked=L.barmode==='stack',vmax=0,vmin=0,sums={};
 bars.forEach(function(t){(t[valKey]||[]).forEach(function(v,i){if(!isNum(v))return;var k=String(t[catKey][i]);
  if(stacked){sums[k]=(sums[k]||0)+Math.max(0,v);vmax=Math.max(vmax,sums[k]);}else vmax=Math.max(vmax,v);vmin=Math.min(vmin,v);});});
 var xlo=Infinity,xhi=-Infinity;
 lines.forEach(function(t){(t.y||[]).forEach(function(v){if(isNum(v)){vmax=Math.max(vmax,v);vmin=Math.min(vmin,v);}});
  (t.x||[]).forEach(function(v){if(isNum(v)){xlo=Math.min(xlo,v);xhi=Math.max(xhi,v);}});});
 var vaxis=horiz?xa:ya,rng=vaxis.range;
 var lo=rng?rng[0]:vmin,hi=rng?rng[1]:(vmax>0?vmax*1.05:1);
 var tk=ticks(lo,hi,horiz?6:5);if(!rng){hi=tk.t[tk.t.length-1]>=hi?tk.t[tk.t.length-1]:hi;}
 tk.t=tk.t.filter(function(v){return v>=lo-1e-12&&v<=hi+1e-12;});
 function vpos(v){v=Math.max(lo,Math.min(hi,v));var f=(v-lo)/(hi-lo||1);return horiz?mg.l+f*pw:mg.t+ph-f*ph;}
 var n=Math.max(1,cats.length),band=(horiz?ph:pw)/n;
 var numCats=cats.length>1&&cats.every(isNum);
 function cpos(c){var i=idx[String(c)];if(i===undefined&&numCats&&isNum(c)){i=(c-cats[0])/(cats[1]-cats[0]);}
  if(i===undefined)i=0;return (horiz?mg.t:mg.l)+(i+0.5)*band;}
 if(numericX){if(!(xhi>xlo)){xhi=xlo+1;}if(xa.range){xlo=xa.range[0];xhi=xa.range[1];}}
 function xnum(v){return mg.l+(v-xlo)/(xhi-xlo)*pw;}
 var g=mk('g',{'class':'mc-axes'},svg);
 // gridlines and value ticks
 tk.t.forEach(function(v){var p=vpos(v);
  if(horiz){mk('line',{x1:p,x2:p,y1:mg.t,y2:mg.t+ph,'class':'mc-grid'},g);mk('text',{x:p,y:mg.t+ph+14,'text-anchor':'middle','class':'mc-tick'},g,fmt(v,tk.s));}
  else{mk('line',{x1:mg.l,x2:mg.l+pw,y1:p,y2:p,'class':'mc-grid'},g);mk('text',{x:mg.l-6,y:p+4,'text-anchor':'end','class':'mc-tick'},g,fmt(v,tk.s));}});
 // category / numeric x ticks
 if(numericX){var xt=ticks(xlo,xhi,Math.max(2,Math.floor(pw/90)));xt.t.forEach(function(v){if(v<xlo-1e-9||v>xhi+1e-9)return;
   mk('text',{x:xnum(v),y:mg.t+ph+14,'text-anchor':'middle','class':'mc-tick'},g,fmt(v,xt.s));});}
 else{var every=Math.max(1,Math.ceil(n/Math.max(1,Math.floor((horiz?ph/16:pw/(xa.tickangle?18:60))))));
  if(numCats){var st=niceStep(n,Math.max(1,Math.floor(pw/60)));every=Math.max(1,Math.round(st));}
  cats.forEach(function(c,i){if(i%every)return;var p=cpos(c),lab=unesc(String(c));
   if(horiz)mk('text',{x:mg.l-6,y:p+4,'text-anchor':'end','class':'mc-tick'},g,lab.length>18?lab.slice(0,17)+'…':lab);
   else if(xa.tickangle)mk('text',{x:p,y:mg.t+ph+12,'text-anchor':'end','class':'mc-tick',transform:'rotate(-40 '+p+' '+(mg.t+ph+12)+')'},g,lab);
   else mk('text',{x:p,y:mg.t+ph+14,'text-anchor':'middle','class':'mc-tick'},g,lab);});}
 mk('line',{x1:mg.l,x2:mg.l+pw,y1:mg.t+ph,y2:mg.t+ph,'class':'mc-axis'},g);
 mk('line',{x1:mg.l,x2:mg.l,y1:mg.t,y2:mg.t+ph,'class':'mc-axis'},g);
 var xt2=title(xa.title),yt2=title(ya.title);
 if(xt2)mk('text',{x:mg.l+pw/2,y:H-6,'text-anchor':'middle','class':'mc-atitle'},svg,unesc(xt2));
 if(yt2)mk('text',{x:14,y:mg.t+ph/2,'text-anchor':'middle','class':'mc-atitle',transform:'rotate(-90 14 '+(mg.t+ph/2)+')'},svg,unesc(yt2));
 // shapes (under the data)
 (L.shapes||[]).forEach(function(s){if(s.type!=='rect')return;var a,b;
  if(numericX){a=xnum(s.x0);b=xnum(s.x1);}else{a=cpos(s.x0+0.5)-band/2;b=cpos(s.x1-0.5)+band/2;}
  var y0=mg.t+ph-(s.y0||0)*ph,y1=mg.t+ph-(s.y1===undefined?1:s.y1)*ph;
  mk('rect',{x:Math.min(a,b),y:Math.min(y0,y1),width:Math.abs(b-a),height:Math.abs(y1-y0),fill:s.fillcolor||'#999','fill-opacity':s.opacity||0.15},svg);});
 // bars
 var gb=mk('g',{'class':'bars'},svg),base={},groups=bars.length,bw=band*0.8;
 bars.forEach(function(t,ti){var col=(t.marker||{}).color||['#4c78a8','#f58518','#e45756','#72b7b2','#54a24b','#b279a2'][ti%6];
  (t[catKey]||[]).forEach(function(c,i){var v=(t[valKey]||[])[i];if(!isNum(v)||v===0)return;var k=String(c);
   var v0=stacked?(base[k]||0):0,v1=v0+v;if(stacked)base[k]=v1;
   var off=stacked?0:(ti-(groups-1)/2)*(bw/groups),w=stacked?bw:bw/groups,cp=cpos(c)+off,p0=vpos(v0),p1=vpos(v1);
   var r=horiz?{x:Math.min(p0,p1),y:cp-w/2,w:Math.abs(p1-p0),h:w}:{x:cp-w/2,y:Math.min(p0,p1),w:w,h:Math.abs(p1-p0)};
   var fill=Array.isArray(col)?col[i]:col;
   var path=mk('path',{d:'M'+r.x+','+r.y+'h'+r.w+'v'+r.h+'h'+(-r.w)+'Z',fill:fill},gb);
   var label=(t.name?unesc(t.name)+' ':'')+unesc(String(c))+': '+(+v.toPrecision(4));
   mk('title',{},path,label);
   var txt=t.text&&t.text[i];
   if(txt){if(horiz){var inside=r.w>40;mk('text',{x:inside?r.x+r.w-4:r.x+r.w+4,y:cp+4,'text-anchor':inside?'end':'start','class':inside?'mc-in':'mc-tick'},gb,unesc(txt));}
    else if(r.h>14)mk('text',{x:cp,y:r.y+12,'text-anchor':'middle','class':'mc-in'},gb,unesc(txt));}
   if(v1>hi&&!horiz)mk('path',{d:'M'+(cp-5)+','+(mg.t+6)+'l5,-6l5,6Z','class':'mc-clip'},gb);});});
 // lines
 var gl=mk('g',{'class':'scatterlayer'},svg);
 lines.forEach(function(t,ti){var col=(t.marker||{}).color||(t.line||{}).color||['#4c78a8','#e45756','#54a24b','#f58518','#b279a2','#72b7b2'][ti%6];
  var pts=[];(t.x||[]).forEach(function(x,i){var y=(t.y||[])[i];if(!isNum(y))return;var px=numericX?xnum(x):cpos(x);pts.push([px,vpos(y),x,y]);});
  if(!pts.length)return;t._col=col;
  if((t.mode||'lines').indexOf('lines')>=0)mk('path',{d:'M'+pts.map(function(p){return p[0].toFixed(1)+','+p[1].toFixed(1);}).join('L'),fill:'none',stroke:col,'stroke-width':1.6},gl);
  if((t.mode||'').indexOf('markers')>=0||pts.length===1)pts.forEach(function(p){var c=mk('circle',{cx:p[0],cy:p[1],r:3,fill:col},gl);mk('title',{},c,(t.name?unesc(t.name)+' ':'')+p[2]+': '+(+p[3].toPrecision(4)));});});
 // annotations
 (L.annotations||[]).forEach(function(a){var px=numericX?xnum(a.x):cpos(a.x),py=a.yref==='paper'?mg.t+ph-(a.y||0)*ph:vpos(a.y);
  mk('text',{x:px,y:py,'text-anchor':'middle','class':'mc-note'},svg,unesc(a.text));});
 // legend below the plot: never over an axis title
 var named=data.filter(function(t){return t.name&&(t.type==='scatter'||data.length>1);});
 if(named.length>1||(named.length===1&&lines.length)){var lg=document.createElement('div');lg.className='mc-legend';
  named.forEach(function(t,ti){var s=document.createElement('span'),sw=document.createElement('i');var c=(t.marker||{}).color||t._col||'#888';
   sw.style.background=Array.isArray(c)?c[0]:c;s.appendChild(sw);s.appendChild(document.createTextNode(unesc(t.name)));lg.appendChild(s);});el.appendChild(lg);}
}
window.haiprofDraw=draw;
var figs=JSON.parse(document.getElementById('haiprof-figures').textContent);
Object.keys(figs).forEach(function(k){var el=document.getElementById('fig-'+k);if(el){try{draw(el,figs[k]);}catch(e){
 el.textContent='chart '+k+' could not be drawn: '+e;}}});
})();
"""

CSS = """
.main-svg{display:block;font:11px system-ui,sans-serif}.main-svg .mc-title{font-size:14px;fill:#333}
.mc-grid{stroke:#eee}.mc-axis{stroke:#999}.mc-tick{fill:#555}.mc-atitle{fill:#444;font-size:12px}
.mc-in{fill:#fff;font-size:11px}.mc-note{fill:#b00;font-size:11px}.mc-clip{fill:#b00}
.mc-legend{font:12px system-ui,sans-serif;color:#444;margin:0 0 6px 64px}.mc-legend span{margin-right:14px;white-space:nowrap}
.mc-legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
"""
